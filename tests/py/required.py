"""What a test needs beyond the build (a real model, a tool, PyPI) and what it does without it: it
skips, saying why, on a developer's machine, and fails where the run must be complete (CI=true, as
CI sets it, or DESKSIDE_REQUIRE_MODELS=1), so that a CI run cannot pass by skipping. The C++ side
is tests/support/required.h."""
import os

import pytest


def models_required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("DESKSIDE_REQUIRE_MODELS", "") not in ("", "0")


def skip_or_fail(reason: str):
    if models_required():
        pytest.fail(f"{reason} (a complete run is required here: CI=true or DESKSIDE_REQUIRE_MODELS)")
    pytest.skip(reason)
