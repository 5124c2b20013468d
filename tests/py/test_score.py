"""`deskside score` end to end: the files it writes parse with the standard csv, json and XML
readers; bad input is a clear error with nothing left behind; the progress bar shows only on a
terminal; and `--tasks` gives the acc / acc_norm that lm-evaluation-harness gets from `deskside
serve` on the same models (lm_eval itself runs, from the venv scripts/eval-harness.sh keeps).

The numbers of `--text` against llama-perplexity are checked in tests/engine/test_score.cpp."""
import csv
import json
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pexpect
import pytest

from required import skip_or_fail

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "api"))
from serve_helpers import Server  # noqa: E402

SHARED = REPO.parent / "shared"
MODELS = [SHARED / "models" / n for n in ("stories260K.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf")]
TEXT = SHARED / "reference" / "ppl-text-gpl3.txt"
TASKS = REPO / "tests" / "eval" / "stories_mc.jsonl"
EVAL_VENV = REPO / ".venv-eval"


def score(deskside_bin, *args, timeout=600):
    return subprocess.run([str(deskside_bin), "score", *map(str, args)], capture_output=True, text=True, timeout=timeout)


def model_flags(models):
    return [a for m in models for a in ("-m", m)]


@pytest.fixture(scope="module")
def text_run(deskside_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("score")
    r = score(deskside_bin, *model_flags(MODELS), "--text", TEXT, "-c", 128, "-t", 2,
              "--csv", out / "r.csv", "--json", out / "r.json", "--plot", out / "r.svg")
    assert r.returncode == 0, r.stderr
    return r, out


def test_table_has_a_row_per_model_and_the_kld_blocks(text_run):
    r, _ = text_run
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["model", "size", "MiB", "bpw"]
    for m in MODELS:
        assert sum(line.startswith(m.name + " ") for line in lines) == 1, r.stdout
    # llama-perplexity's three blocks for each compared model.
    assert r.stdout.count("====== KL divergence statistics ======") == 2
    assert r.stdout.count("Same top p:") == 2
    assert "ETA" not in r.stderr  # stderr is a pipe here: no progress bar


def test_csv_and_json_parse(text_run):
    _, out = text_run
    rows = list(csv.DictReader(open(out / "r.csv", newline="")))
    assert [row["model"] for row in rows] == [m.name for m in MODELS]
    assert rows[0]["kld_mean"] == "" and float(rows[2]["kld_mean"]) > float(rows[1]["kld_mean"]) > 0
    assert all(float(row["ppl"]) > 1 for row in rows)
    j = json.load(open(out / "r.json"))
    assert j["text"]["n_ctx"] == 128 and j["base"] == str(MODELS[0])
    assert [m["label"] for m in j["models"]] == [m.name for m in MODELS]
    assert [m["file_size"] for m in j["models"]] == [m.stat().st_size for m in MODELS]
    assert "kld_vs_base" not in j["models"][0]
    for m in j["models"]:
        assert m["ppl"]["n_chunks"] == 173 and m["ppl"]["n_scored"] == 173 * 63
    for m in j["models"][1:]:
        k = m["kld_vs_base"]
        assert k["n_tokens"] == 173 * 63
        q = k["kld"]["quantiles"]
        assert q["min"] <= q["p1"] <= q["median"] <= q["p99"] <= q["max"]
        assert 0 < k["same_top"]["value"] <= 1
    # The CSV and the JSON say the same.
    assert float(rows[1]["kld_p99"]) == pytest.approx(j["models"][1]["kld_vs_base"]["kld"]["quantiles"]["p99"], rel=1e-8)


def test_svg_parses_with_a_labelled_point_per_model(text_run):
    _, out = text_run
    root = ET.parse(out / "r.svg").getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    points = root.findall("s:g[@class='point']", ns)
    assert sorted(p.find("s:text", ns).text for p in points) == sorted(m.name for m in MODELS)
    assert all(p.find("s:circle", ns) is not None for p in points)
    assert len(root.findall("s:g[@class='xtick']", ns)) >= 2 and len(root.findall("s:g[@class='ytick']", ns)) >= 2
    # Smaller files sit further left; the Q4_0 file has the highest perplexity, so it is drawn highest.
    pos = {p.find("s:text", ns).text: p.find("s:circle", ns) for p in points}
    cx = {k: float(c.get("cx")) for k, c in pos.items()}
    cy = {k: float(c.get("cy")) for k, c in pos.items()}
    assert cx["stories260K-q4_0.gguf"] < cx["stories260K-q8_0.gguf"] < cx["stories260K.gguf"]
    assert cy["stories260K-q4_0.gguf"] == min(cy.values())


def test_progress_bar_on_a_terminal(deskside_bin, tmp_path):
    child = pexpect.spawn(str(deskside_bin), ["score", "-m", str(MODELS[0]), "-m", str(MODELS[2]), "--text", str(TEXT),
                                              "-c", "128", "-t", "2"], timeout=300, encoding="utf-8")
    child.expect(r"score --text \[[#.]+\] \d+/346  ETA \d+m\d\ds")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def write(path, text):
    path.write_text(text)
    return path


def outputs(out, args):
    """Every output file the run can write (--plot draws perplexity: only with --text)."""
    plot = ["--plot", out / "r.svg"] if "--text" in args else []
    return ["--csv", out / "r.csv", "--json", out / "r.json", *plot]


def bad_input_cases(tmp):
    tasks = TASKS.read_text().splitlines()
    broken = tasks[:2] + ['{"context": "A cat", "choices": ["sat.", "flew."], "gold": 0'] + tasks[3:]
    gold = tasks[:1] + ['{"context": "A cat", "choices": ["sat.", "flew.", "sang.", "ran."], "gold": 7}']
    return {
        "missing model": (model_flags([MODELS[0], tmp / "absent.gguf"]) + ["--text", TEXT],
                          str(tmp / "absent.gguf")),
        "missing text": (model_flags(MODELS[:1]) + ["--text", tmp / "absent.txt"],
                         f"--text {tmp / 'absent.txt'}: cannot open the file"),
        "short text": (model_flags(MODELS[:2]) + ["--text", write(tmp / "short.txt", "Once upon a time."), "-c", "128"],
                       "shorter than one chunk of -c 128"),
        "malformed line": (model_flags(MODELS[:1]) + ["--tasks", write(tmp / "broken.jsonl", "\n".join(broken))],
                           f"{tmp / 'broken.jsonl'}:3: malformed JSON"),
        "gold out of range": (model_flags(MODELS[:1]) + ["--tasks", write(tmp / "gold.jsonl", "\n".join(gold))],
                              f"{tmp / 'gold.jsonl'}:2: gold index 7 is out of range for 4 choices"),
        "no choices": (model_flags(MODELS[:1]) + ["--tasks", write(tmp / "one.jsonl", '{"context": "A", "choices": ["b"],'
                                                                                      ' "gold": 0}')],
                       f"{tmp / 'one.jsonl'}:1: \"choices\" must be an array of 2 or more strings"),
    }


@pytest.mark.parametrize("case", ["missing model", "missing text", "short text", "malformed line", "gold out of range",
                                  "no choices"])
def test_bad_input_is_a_clear_error_and_writes_nothing(deskside_bin, tmp_path, case):
    inputs = tmp_path / "in"
    inputs.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    args, message = bad_input_cases(inputs)[case]
    r = score(deskside_bin, *args, *outputs(out, args))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert r.stdout == ""
    assert list(out.iterdir()) == []


def test_an_output_that_cannot_be_written_leaves_no_other_file(deskside_bin, tmp_path):
    (tmp_path / "r.json").mkdir()  # a folder where the JSON should go: its rename fails
    r = score(deskside_bin, "-m", MODELS[0], "--text", TEXT, "-c", 128, "--csv", tmp_path / "r.csv",
              "--json", tmp_path / "r.json")
    assert r.returncode == 1 and f"cannot write {tmp_path / 'r.json'}" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert list((tmp_path / "r.json").iterdir()) == []


def test_missing_output_folder_is_a_usage_error(deskside_bin, tmp_path):
    r = score(deskside_bin, "-m", MODELS[0], "--text", TEXT, "--json", tmp_path / "nowhere" / "r.json")
    assert r.returncode == 2 and f"the folder {tmp_path / 'nowhere'} does not exist" in r.stderr, r.stderr


def test_another_vocabulary_gets_perplexity_and_no_kld(deskside_bin, tmp_path):
    other = SHARED / "models" / "llama-2-tiny-random.gguf"
    r = score(deskside_bin, "-m", MODELS[0], "-m", other, "--text", TEXT, "-c", 128, "--json", tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    assert ("warning: KLD needs one vocabulary: llama-2-tiny-random.gguf has 32000 tokens unlike the base's 512; "
            "reporting its perplexity only") in r.stderr
    j = json.load(open(tmp_path / "r.json"))
    tiny = j["models"][1]
    assert "kld_vs_base" not in tiny and "KLD needs one vocabulary" in tiny["kld_missing"]
    # Its own tokenization of the text: another count of chunks than the base's.
    assert tiny["ppl"]["value"] > 1 and tiny["ppl"]["n_chunks"] != j["models"][0]["ppl"]["n_chunks"]


def lm_eval_venv(deskside_bin):
    """The venv scripts/eval-harness.sh runs lm_eval from (made by that script from PyPI when absent
    or stale, which also runs the harness once on stories260K)."""
    installed = EVAL_VENV / "requirements.installed"
    pinned = REPO / "scripts" / "requirements-eval.txt"
    if not (EVAL_VENV / "bin" / "lm_eval").exists() or not installed.exists() or installed.read_text() != pinned.read_text():
        if os.environ.get("DESKSIDE_OFFLINE"):
            pytest.skip("DESKSIDE_OFFLINE is set and .venv-eval is not installed")
        r = subprocess.run([str(REPO / "scripts" / "eval-harness.sh"), "--deskside", str(deskside_bin), "--models",
                            "stories260K"], capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            skip_or_fail(f"scripts/eval-harness.sh could not set up lm_eval: {r.stderr[-2000:]}")
    return EVAL_VENV


def lm_eval_scores(venv, model, tmp_path):
    """acc and acc_norm (with stderr) of lm_eval's local-completions on deskside serve, as
    scripts/eval-harness.sh runs it."""
    server = Server(model, "--alias", "m", "--parallel", "4", "-c", "1024")
    try:
        out = tmp_path / f"lm_eval-{model.stem}"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_DATASETS_CACHE": str(tmp_path / "datasets")}
        r = subprocess.run([str(venv / "bin" / "lm_eval"), "--model", "local-completions", "--model_args",
                            f"model=m,base_url={server.url}/v1/completions,tokenizer_backend=remote,"
                            "tokenized_requests=True,num_concurrent=4,max_retries=1,timeout=600",
                            "--include_path", "tests/eval", "--tasks", "deskside_stories_mc", "--batch_size", "1",
                            "--output_path", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, r.stderr[-3000:]
    finally:
        server.stop()
    results = json.loads(sorted(out.rglob("results_*.json"))[-1].read_text())["results"]["deskside_stories_mc"]
    return {k: results[f"{k},none"] for k in ("acc", "acc_stderr", "acc_norm", "acc_norm_stderr")}


@pytest.mark.slow
@pytest.mark.network
def test_tasks_match_lm_eval_against_deskside_serve(deskside_bin, tmp_path):
    venv = lm_eval_venv(deskside_bin)
    models = [MODELS[0], MODELS[2]]  # Q4_0: acc and acc_norm differ there, so both are tested
    r = score(deskside_bin, *model_flags(models), "--tasks", TASKS, "--json", tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    ours = {m["path"]: m["tasks"] for m in json.load(open(tmp_path / "r.json"))["models"]}
    for model in models:
        theirs = lm_eval_scores(venv, model, tmp_path)
        mine = ours[str(model)]
        assert mine["n"] == 32
        # 32 questions: the accuracies are multiples of 1/32, equal exactly; the standard errors
        # are the same formula (lm_eval's mean_stderr) on the same 0/1 values.
        assert (mine["acc"], mine["acc_norm"]) == (theirs["acc"], theirs["acc_norm"]), (model.name, mine, theirs)
        assert mine["acc_stderr"] == pytest.approx(theirs["acc_stderr"], rel=1e-12)
        assert mine["acc_norm_stderr"] == pytest.approx(theirs["acc_norm_stderr"], rel=1e-12)
