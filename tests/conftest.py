"""Shared by every pytest suite under tests/ (py, api, security): where a run must be complete
(CI=true, as CI sets it, or DESKSIDE_REQUIRE_MODELS=1) a skip is a failure, whatever raised it
(pytest.skip, importorskip, DESKSIDE_OFFLINE): no Python test needs hardware that CI lacks, so a skip
there means something is missing. tests/py/required.py and tests/api/serve_helpers.py say the same
for the tests that check what they need themselves."""
import os

import pytest


def _complete_run_required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("DESKSIDE_REQUIRE_MODELS", "") not in ("", "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and _complete_run_required():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped where a complete run is required (CI=true or DESKSIDE_REQUIRE_MODELS): {reason}"
