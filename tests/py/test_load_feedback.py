"""Feedback during long work on stderr: the model load's progress (plain start/end lines per device
when stderr is a pipe, a redrawn bar on a terminal) for generate, chat and bench, and a line per
bench repetition. /health's load progress is tests/api/test_api_load_progress.py; the PyPI pull's
bar is test_pull_progress.py."""
import os
import re
import subprocess

STORIES = "models/stories260K.gguf"


def run(deskside_bin, *args, env=None):
    return subprocess.run([str(deskside_bin), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def test_generate_load_lines_on_a_pipe(deskside_bin, shared):
    r = run(deskside_bin, "generate", "-m", shared / STORIES, "-p", "Once", "-n", 4, "--temp", 0)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert "\r" not in r.stderr and "\033" not in r.stderr
    starts = [l for l in lines if l.startswith("loading stories260K: cpu: repacking ")]
    ends = [l for l in lines if re.fullmatch(r"loading stories260K: cpu: done in \d+\.\d s", l)]
    assert len(starts) == 1 and len(ends) == 1, r.stderr
    assert "upon a time" in r.stdout and "loading" not in r.stdout  # stdout holds the completion only


def test_two_devices_load_one_after_the_other(deskside_bin, shared):
    r = run(deskside_bin, "generate", "-m", shared / STORIES, "-p", "Once", "-n", 2, "--devices", "cpu,cpu")
    assert r.returncode == 0, r.stderr
    load = [l for l in r.stderr.splitlines() if l.startswith("loading stories260K")]
    assert len(load) == 4 and all(": cpu: " in l for l in load), load
    assert "repacking" in load[0] and "done" in load[1] and "repacking" in load[2] and "done" in load[3], load


def test_chat_load_bar_on_a_terminal(deskside_bin, shared):
    import pexpect
    child = pexpect.spawn(str(deskside_bin), ["chat", "-m", str(shared / STORIES)], timeout=120, encoding="utf-8",
                          env={**os.environ, "DESKSIDE_TEST_LOAD_DELAY_MS": "20"})
    child.expect(r"100%.*\n")
    out = child.before + child.after
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    # Redrawn in place (a carriage return per redraw) with the device, what it does and a bar.
    assert "\r" in out
    assert re.search(r"loading stories260K\.\.\. cpu: repacking  \[#* *\] +\d+%", out), out
    assert re.search(r"\[#{20}\] 100%  [\d.]+/[\d.]+ (KiB|MiB)  \d+\.\d s", out), out


def test_bench_prints_a_line_per_repetition(deskside_bin, shared):
    r = run(deskside_bin, "bench", "-m", shared / STORIES, "-p", 8, "-n", 4, "-r", 3)
    assert r.returncode == 0, r.stderr
    for test in ("pp8", "tg4"):
        runs = re.findall(rf"^bench: {test} run (\d)/3: [\d.]+ t/s \([\d.]+ s\)$", r.stderr, re.M)
        assert runs == ["1", "2", "3"], r.stderr
    assert "| pp8" in r.stdout.replace("  ", " ") or "pp8" in r.stdout


def test_batched_bench_prints_a_line_per_run(deskside_bin, shared):
    r = run(deskside_bin, "bench", "-m", shared / STORIES, "-npp", 8, "-ntg", 2, "-npl", "1,2")
    assert r.returncode == 0, r.stderr
    runs = re.findall(r"^bench: run (\d)/2: pp 8, tg 2, pl (\d): [\d.]+ s$", r.stderr, re.M)
    assert runs == [("1", "1"), ("2", "2")], r.stderr
