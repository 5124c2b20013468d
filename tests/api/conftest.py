"""Fixtures for the HTTP API suites (helpers in serve_helpers.py)."""
import json

import pytest

from serve_helpers import SHARED, STORIES, TEMPLATE, started_servers


@pytest.fixture(scope="session")
def start_server():
    """start_server(model, *flags, api_key=None) -> Server; all are stopped at the end."""
    yield from started_servers()


@pytest.fixture(scope="session")
def stories(start_server):
    """stories260K with a ChatML template, 16 slots, 2048 positions each."""
    return start_server(STORIES, "--chat-template", TEMPLATE, "--parallel", 16, "--queue", 64, "--ctx-size", 2048)


@pytest.fixture(scope="session")
def reference():
    return json.loads((SHARED / "reference" / "stories260K.json").read_text())
