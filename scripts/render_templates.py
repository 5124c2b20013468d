#!/usr/bin/env python3
"""Render every chat template in ../shared/templates with Python's jinja2 exactly as
transformers' apply_chat_template does, and write the results as test fixtures.

The environment mirrors transformers.utils.chat_template_utils._compile_jinja_template:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension, a {% generation %} tag that renders its body, a `tojson` filter that is plain
json.dumps (ensure_ascii=False, no HTML escaping), and the globals raise_exception and
strftime_now. render() gets messages, tools (None when absent), documents=None,
add_generation_prompt, bos_token, eos_token and the case's extra keyword arguments, the way
apply_chat_template passes them. strftime_now sees the fixed date from cases.json so the
fixtures do not change with the calendar (the C++ side gets the same date via DESKSIDE_NOW).

Writes tests/templates/expected/<template>.<case>.txt (the exact rendered bytes) or
<template>.<case>.error ("<ExceptionType>: <message>") when jinja2 raises. Also renders:
  - the templates of the Hugging Face tokenizer directories under ../shared/models/hf-tokenizers
    (tokenizer_config.json "chat_template", with that file's bos/eos tokens) as hf-<dir>.<case>;
  - tests/templates/snippets.txt, small templates pinning one jinja2 behaviour each, rendered
    with cases.json's "snippet_context" as snippet.<name>.

usage: .venv/bin/python scripts/render_templates.py [--templates DIR] [--out DIR]
"""

import argparse
import datetime
import json
import pathlib
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parent.parent


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers uses it to mark assistant spans;
    for plain rendering it outputs its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_environment(now: datetime.datetime) -> ImmutableSandboxedEnvironment:
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return now.strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_case(env, source: str, tokens: dict, case: dict) -> str:
    """tokens: the bos_token / eos_token the tokenizer defines (absent keys stay undefined)."""
    template = env.from_string(source)
    special = {k: tokens[k] for k in ("bos_token", "eos_token") if k in tokens}
    return template.render(
        messages=case["messages"],
        tools=case.get("tools"),
        documents=None,
        add_generation_prompt=case["add_generation_prompt"],
        **special,
        **case.get("kwargs", {}),
    )


def write_result(out: pathlib.Path, stem: str, render, counts: dict) -> None:
    try:
        text = render()
    except Exception as e:  # every jinja2 failure becomes a fixture the C++ side must match
        message = str(e).replace("\n", " ")
        (out / f"{stem}.error").write_text(f"{type(e).__name__}: {message}\n", encoding="utf-8")
        counts["error"] += 1
        return
    with open(out / f"{stem}.txt", "w", encoding="utf-8", newline="") as f:
        f.write(text)
    counts["ok"] += 1


def read_snippets(path: pathlib.Path) -> list:
    """(name, source) pairs from snippets.txt: "### name" headers, bodies without the last newline."""
    snippets, name, lines = [], None, []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("### "):
            if name is not None:
                snippets.append((name, "\n".join(lines)))
            name, lines = line[4:].strip(), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        snippets.append((name, "\n".join(lines).rstrip("\n")))
    return snippets


def special_token(cfg: dict, key: str) -> str:
    t = cfg.get(key)
    return t.get("content", "") if isinstance(t, dict) else (t or "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--templates", default=str(ROOT.parent / "shared" / "templates"))
    ap.add_argument("--cases", default=str(ROOT / "tests" / "templates" / "cases.json"))
    ap.add_argument("--hf-tokenizers", default=str(ROOT.parent / "shared" / "models" / "hf-tokenizers"))
    ap.add_argument("--snippets", default=str(ROOT / "tests" / "templates" / "snippets.txt"))
    ap.add_argument("--out", default=str(ROOT / "tests" / "templates" / "expected"))
    args = ap.parse_args()

    spec = json.loads(pathlib.Path(args.cases).read_text(encoding="utf-8"))
    now = datetime.datetime.strptime(spec["now"], "%Y-%m-%d")
    env = make_environment(now)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in list(out.glob("*.txt")) + list(out.glob("*.error")):
        stale.unlink()

    counts = {"ok": 0, "error": 0}
    for path in sorted(pathlib.Path(args.templates).glob("*.jinja")):
        # transformers reads chat_template.jinja in text mode; jinja2 normalizes newlines anyway.
        source = path.read_text(encoding="utf-8")
        for case in spec["cases"]:
            write_result(out, f"{path.stem}.{case['name']}", lambda: render_case(env, source, spec, case), counts)

    for cfg_path in sorted(pathlib.Path(args.hf_tokenizers).glob("*/tokenizer_config.json")):
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        template = cfg["chat_template"]
        if isinstance(template, list):
            template = next(t["template"] for t in template if t["name"] == "default")
        # transformers passes only the special tokens the tokenizer has (bos_token: null -> undefined)
        tokens = {k: special_token(cfg, k) for k in ("bos_token", "eos_token") if cfg.get(k) is not None}
        for case in spec["cases"]:
            write_result(out, f"hf-{cfg_path.parent.name}.{case['name']}",
                         lambda: render_case(env, template, tokens, case), counts)

    for name, source in read_snippets(pathlib.Path(args.snippets)):
        write_result(out, f"snippet.{name}",
                     lambda: env.from_string(source).render(**spec["snippet_context"]), counts)
    print(f"rendered {counts['ok']} cases, {counts['error']} raise; fixtures in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
