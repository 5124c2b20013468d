"""Fixtures for the hostile-client suite: servers started with small limits so that every limit
is reached in milliseconds (helpers in hostile.py, the server runner in tests/api/serve_helpers.py)."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "api"))
from serve_helpers import STORIES, TEMPLATE, started_servers  # noqa: E402
from hostile import (ALLOWED_HOST, BODY_TIMEOUT, CORS_ORIGIN, HEADER_TIMEOUT, MAX_BODY, MAX_CLIENT_CONNS,  # noqa: E402
                     MAX_HEADER_BYTES, MAX_HEADERS)


@pytest.fixture(scope="session")
def start_server():
    """start_server(model, *flags, api_key=None) -> Server; all are stopped at the end."""
    yield from started_servers()


@pytest.fixture(scope="session")
def hard(start_server):
    return start_server(STORIES, "--chat-template", TEMPLATE, "--parallel", 2, "--ctx-size", 512,
                        "--max-body", MAX_BODY, "--max-header-bytes", MAX_HEADER_BYTES, "--max-headers", MAX_HEADERS,
                        "--header-timeout", HEADER_TIMEOUT, "--body-timeout", BODY_TIMEOUT,
                        "--max-client-conns", MAX_CLIENT_CONNS, "--cors-origin", CORS_ORIGIN,
                        "--allow-host", ALLOWED_HOST)


@pytest.fixture(scope="session")
def keyed(start_server):
    """With an API key, and the access log as JSON."""
    return start_server(STORIES, "--log-format", "json", api_key="sekrit")
