"""`deskside chat` driven as a terminal program (pexpect, a real pty), and `deskside generate` on
the real Gemma 3 270M model: the issue's acceptance lines (it loads, generate writes English,
chat holds a conversation).

stories260K (tiny, fast, no chat template: the built-in plain format) and a synthetic random
model (never ends its answer by itself, so Ctrl-C always lands mid-answer) run everywhere; the
Gemma tests skip unless scripts/fetch-gemma3-270m.sh has put the model in the cache (and fail
without it in CI: required.py).
"""
import os
import pathlib
import re
import signal
import subprocess

import pexpect
import pytest

from required import skip_or_fail

GEMMA = pathlib.Path(
    os.environ.get("DESKSIDE_GEMMA3_270M",
                   pathlib.Path.home() / ".cache/deskside/models/gemma-3-270m-q4_k_m.gguf"))
STATS = re.compile(r"\[(\d+) tokens, [\d.]+ tokens/s, ([a-z ]+); prompt: (\d+) new \+ (\d+) cached tokens")
PROMPT = "\r\n> "


def spawn_chat(deskside_bin, *args, timeout=120):
    child = pexpect.spawn(str(deskside_bin), ["chat", *map(str, args)], encoding="utf-8",
                          timeout=timeout, dimensions=(50, 200))
    child.expect("> ")  # the first prompt: the model is loaded
    return child


def ask(child, text):
    """Sends one message; returns (answer text, generated count, finish, new prompt tokens, cached)."""
    child.sendline(text)
    child.expect(STATS)
    streamed = child.before
    n, finish, new, cached = child.match.groups()
    child.expect("> ")
    # The pty echoes the input line first; the answer follows it.
    answer = streamed.split(text, 1)[-1]
    answer = re.sub(r"\x1b\[[0-9;]*m", "", answer).strip()
    return answer, int(n), finish.strip(), int(new), int(cached)


def exit_chat(child):
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_chat_stories_turns_reset_and_exit(deskside_bin, shared):
    child = spawn_chat(deskside_bin, "-m", shared / "models/stories260K.gguf", "--temp", "0", "-n", "60",
                       "-t", "1")
    assert 'built-in "plain" format' in child.before
    answer, n, finish, new, cached = ask(child, "Once upon a time there was a little girl named Lily.")
    assert n > 0 and re.search(r"[A-Za-z]{3,}", answer), answer
    assert cached == 0
    # The second turn re-renders the conversation: the first turn is already in the KV cache.
    answer2, n2, _, new2, cached2 = ask(child, "What did Lily see?")
    assert n2 > 0 and answer2
    assert cached2 > new, (new2, cached2)
    child.sendline("/reset")
    child.expect_exact("(conversation cleared)")
    child.expect("> ")
    # After /reset the same first question gives the same greedy answer as the first time.
    again, *_ = ask(child, "Once upon a time there was a little girl named Lily.")
    assert again == answer
    exit_chat(child)


def test_chat_multiline_and_eof(deskside_bin, shared):
    child = spawn_chat(deskside_bin, "-m", shared / "models/stories260K.gguf", "--temp", "0", "-n", "8")
    child.sendline("Tom had a red ball.\\")
    child.expect_exact("... ")
    child.sendline("He liked to play.")
    child.expect(STATS)
    child.expect("> ")
    child.sendline('"""')
    child.expect_exact("... ")
    child.sendline("first line")
    child.expect_exact("... ")
    child.sendline('"""')
    child.expect(STATS)
    child.expect("> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_chat_ctrl_c_stops_answer_not_chat(deskside_bin, shared):
    # A random-weight model: greedy decoding does not reach the end-of-sequence token, so the
    # answer is still running when Ctrl-C arrives.
    child = spawn_chat(deskside_bin, "-m", shared / "models/synth-k.gguf", "--temp", "0", "-c", "60000", "-t", "1")
    child.sendline("hello")
    child.expect(r"\S{8,}")  # streamed text is arriving
    child.sendintr()
    child.expect(STATS)
    assert child.match.group(2) == "interrupted"
    child.expect("> ")
    # Ctrl-C at the prompt clears the line; a second one quits with status 0.
    child.sendintr()
    child.expect_exact("Ctrl-C again")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_chat_rejects_bad_template_file(deskside_bin, shared, tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m.content }")
    r = subprocess.run([deskside_bin, "chat", "-m", shared / "models/stories260K.gguf", "--chat-template", bad],
                       capture_output=True, text=True, input="", timeout=60)
    assert r.returncode == 1
    assert str(bad) in r.stderr and "line" in r.stderr


def test_chat_template_file_overrides(deskside_bin, shared, tmp_path):
    tmpl = tmp_path / "t.jinja"
    tmpl.write_text("{% for m in messages %}Q: {{ m.content }}\n{% endfor %}A:")
    child = spawn_chat(deskside_bin, "-m", shared / "models/stories260K.gguf", "--chat-template", tmpl,
                       "--temp", "0", "-n", "5")
    assert str(tmpl) in child.before
    ask(child, "hi")
    exit_chat(child)


@pytest.fixture
def gemma_present():
    if not GEMMA.exists():
        skip_or_fail(f"{GEMMA} is absent: run scripts/fetch-gemma3-270m.sh to fetch it")


gemma = pytest.mark.usefixtures("gemma_present")

# Common English function words: gibberish or broken weights do not produce several of them.
COMMON_WORDS = {"the", "a", "an", "of", "and", "to", "in", "is", "it", "that", "for", "on", "with", "as",
                "was", "are", "be", "by", "this", "from", "or", "at", "its", "which", "city", "capital"}


@gemma
def test_gemma_generate_writes_english(deskside_bin):
    r = subprocess.run([deskside_bin, "generate", "-m", GEMMA, "-p", "The capital of France is", "-n", "40",
                        "--temp", "0"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    letters = sum(c.isascii() and (c.isalpha() or c.isspace()) for c in text)
    assert len(text) > 40 and letters / len(text) > 0.85, text
    words = set(re.findall(r"[a-z]+", text.lower()))
    assert len(words & COMMON_WORDS) >= 3, text


# The PyPI file is the pretrained Gemma 3 270M (general.name "Gemma 3 270m", no instruction
# tuning, no chat template): with Gemma's turn format it does not answer (greedy output is one
# word repeated), but as a question/answer transcript it does. So the conversation tests give
# it that transcript as --chat-template and end each answer at the next "Question:".
QA_TEMPLATE = ("{% for m in messages %}{% if m.role == 'user' %}Question: {{ m.content }}\nAnswer:"
               "{% else %} {{ m.content }}\n{% endif %}{% endfor %}")


def spawn_gemma(deskside_bin, tmp_path, *args):
    tmpl = tmp_path / "qa.jinja"
    tmpl.write_text(QA_TEMPLATE)
    return spawn_chat(deskside_bin, "-m", GEMMA, "--chat-template", tmpl, "--stop", "\nQuestion:",
                      "--stop", "\n\n", "--temp", "0", *args, timeout=300)


@gemma
def test_gemma_chat_builtin_template_chosen(deskside_bin):
    child = spawn_chat(deskside_bin, "-m", GEMMA, "--temp", "0", "-n", "4", timeout=300)
    assert 'built-in "gemma" format for architecture gemma3' in child.before
    ask(child, "Hello")
    exit_chat(child)


@gemma
def test_gemma_chat_conversation(deskside_bin, tmp_path):
    child = spawn_gemma(deskside_bin, tmp_path, "-n", "24")
    answer, n, finish, _, _ = ask(child, "What is the capital of France?")
    assert "Paris" in answer, answer
    answer2, _, _, new2, cached2 = ask(child, "What is the capital of Italy?")
    assert "Rome" in answer2, answer2
    assert cached2 > new2
    child.sendline("/reset")
    child.expect_exact("(conversation cleared)")
    child.expect("> ")
    again, *_ = ask(child, "What is the capital of France?")
    assert again == answer
    exit_chat(child)


@gemma
def test_gemma_chat_ctrl_c(deskside_bin, tmp_path):
    tmpl = tmp_path / "story.jinja"
    tmpl.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    child = spawn_chat(deskside_bin, "-m", GEMMA, "--chat-template", tmpl, "--temp", "0", "-n", "100000",
                       timeout=300)
    child.sendline("Once upon a time, a dragon and a knight")
    child.expect("a knight\r\n")  # the terminal's echo of the line: its words are not the model's
    child.expect(r"[A-Za-z]+ [A-Za-z]+ [A-Za-z]+ [A-Za-z]+")  # streamed words
    child.sendintr()
    child.expect(STATS)
    assert child.match.group(2) == "interrupted"
    child.expect("> ")
    exit_chat(child)


def test_chat_help_lists_options(deskside_bin):
    r = subprocess.run([deskside_bin, "chat", "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    for opt in ("--system", "--chat-template", "--n-predict", "--temp", "--threads", "/reset", '"""'):
        assert opt in r.stdout + r.stderr, opt
