"""Grammar-constrained sampling checked by a validator we did not write: grammar_tool samples
documents with random logits among the tokens the grammar mask allows, over real vocabularies
(stories260K's SentencePiece, Qwen2's byte-level BPE), and the jsonschema package validates every
one of them, formats included."""
import datetime
import json
import pathlib
import subprocess

import jsonschema
import pytest

DOCS = 50
# The 151k-token Qwen2 vocabulary costs more per token (docs/SERVER.md has the figures): fewer
# documents there keep the suite within CI's time, and every one is still validated.
DOCS_PER_VOCAB = {"stories260K.gguf": DOCS, "vocab/ggml-vocab-qwen2.gguf": 8}

VOCABS = ["stories260K.gguf", "vocab/ggml-vocab-qwen2.gguf"]

SCHEMAS = {
    "nested_objects": {
        "type": "object",
        "properties": {
            "user": {
                "type": "object",
                "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 8},
                               "age": {"type": "integer", "minimum": 18, "maximum": 99}},
                "required": ["name", "age"],
                "additionalProperties": False,
            },
            "active": {"type": "boolean"},
            "score": {"type": "number"},
        },
        "required": ["user", "active"],
        "additionalProperties": False,
    },
    "arrays": {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5},
                    "minItems": 2, "maxItems": 4},
            "pair": {"type": "array", "prefixItems": [{"type": "string", "maxLength": 3}, {"type": "null"}],
                     "items": False},
        },
        "required": ["ids", "pair"],
        "additionalProperties": False,
    },
    "enums": {
        "type": "object",
        "properties": {"color": {"enum": ["red", "green", "blue \"sky\""]}, "level": {"enum": [1, 2.5, None, True]},
                       "kind": {"const": "fixed"}},
        "required": ["color", "level", "kind"],
        "additionalProperties": False,
    },
    "any_of": {
        "type": "array",
        "items": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "integer", "exclusiveMinimum": 100},
                            {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"],
                             "additionalProperties": False}]},
        "maxItems": 5,
    },
    "ref_recursion": {
        "$defs": {"node": {"type": "object",
                           "properties": {"label": {"type": "string", "maxLength": 5},
                                          "children": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                       "maxItems": 2}},
                           "required": ["label"], "additionalProperties": False}},
        "$ref": "#/$defs/node",
    },
    "formats": {
        "type": "object",
        "properties": {"day": {"type": "string", "format": "date"}, "at": {"type": "string", "format": "date-time"},
                       "clock": {"type": "string", "format": "time"}, "id": {"type": "string", "format": "uuid"},
                       "mail": {"type": "string", "format": "email"}, "ip": {"type": "string", "format": "ipv4"}},
        "required": ["day", "at", "clock", "id", "mail", "ip"],
        "additionalProperties": False,
    },
    "nullable": {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"], "maxLength": 3}, "b": {"type": "integer", "nullable": True},
                       "c": {"anyOf": [{"type": "boolean"}, {"type": "null"}]}},
        "required": ["a", "b", "c"],
        "additionalProperties": False,
    },
    "pattern_and_extras": {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
                       "note": {"type": "string", "pattern": "ok"}},
        "required": ["code"],
        "additionalProperties": {"type": "integer"},
    },
}


def format_checker() -> jsonschema.FormatChecker:
    """The package's checkers, with date-time and time read by Python's datetime (the package skips
    them without the optional rfc3339-validator)."""
    checker = jsonschema.FormatChecker()
    checker.checks("date-time", raises=ValueError)(lambda s: datetime.datetime.fromisoformat(s) is not None)
    checker.checks("time", raises=ValueError)(check_time)
    return checker


def check_time(text: str) -> bool:
    """RFC 3339 full-time: a partial time and a required offset (Z or +HH:MM / -HH:MM)."""
    if not (text.endswith("Z") or (len(text) > 6 and text[-6] in "+-")):
        return False
    return datetime.time.fromisoformat(text) is not None


def without_nullable(schema):
    """OpenAPI's nullable: true, which JSON Schema ignores, as the type list it stands for."""
    if isinstance(schema, list):
        return [without_nullable(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: without_nullable(v) for k, v in schema.items() if k != "nullable"}
    if schema.get("nullable") is True:
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def sample(tool, vocab, schema_arg, seed=1, count=DOCS, max_tokens=4000, allow_incomplete=False):
    """grammar_tool exits 3 when a document hit max_tokens before it was complete."""
    out = subprocess.run([str(tool), "sample", str(vocab), str(schema_arg), "--seed", str(seed), "--count", str(count),
                          "--max-tokens", str(max_tokens)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 or (allow_incomplete and out.returncode == 3), out.stderr
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(docs) == count
    return docs


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_sampled_documents_validate(grammar_tool, shared, tmp_path, vocab, name):
    schema = SCHEMAS[name]
    if name == "formats" and "qwen2" in vocab:
        # An e-mail address drawn from random logits over 151k tokens runs for thousands of tokens
        # before it happens to end; stories260K's 512-token vocabulary covers the email grammar.
        schema = json.loads(json.dumps(schema))
        del schema["properties"]["mail"]
        schema["required"].remove("mail")
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(schema))
    validator = jsonschema.Draft202012Validator(without_nullable(schema), format_checker=format_checker())
    texts = set()
    count = DOCS_PER_VOCAB[vocab]
    for doc in sample(grammar_tool, shared / "models" / vocab, path, count=count):
        assert doc["complete"], doc
        value = json.loads(doc["text"])
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, (doc["text"], errors)
        texts.add(doc["text"])
    assert len(texts) > count // 2, "the documents hardly differ: the sampling is not random"


@pytest.mark.parametrize("vocab", VOCABS)
def test_json_object(grammar_tool, shared, vocab):
    # Free-form JSON under random logits rarely closes its strings: incomplete documents are
    # allowed, the complete ones must parse, and every prefix is checked by the C++ tests.
    docs = sample(grammar_tool, shared / "models" / vocab, "--json-object", count=min(20, DOCS_PER_VOCAB[vocab]),
                  max_tokens=300, allow_incomplete=True)
    for doc in docs:
        if doc["complete"]:
            assert isinstance(json.loads(doc["text"]), dict), doc["text"]


@pytest.mark.parametrize("schema,keyword,path", [
    ({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}, "multipleOf",
     "properties.n.multipleOf"),
    ({"type": "array", "items": {"type": "string", "format": "hostname"}}, "format", "items.format"),
    ({"type": "object", "dependentRequired": {"a": ["b"]}}, "dependentRequired", "dependentRequired"),
    ({"type": "string", "pattern": "(?=x)"}, "pattern", "pattern"),
])
def test_unsupported_keyword_fails_naming_it(grammar_tool, shared, tmp_path, schema, keyword, path):
    file = tmp_path / "s.json"
    file.write_text(json.dumps(schema))
    out = subprocess.run([str(grammar_tool), "sample", str(shared / "models" / "stories260K.gguf"), str(file)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert f"keyword '{keyword}'" in out.stderr and f"'{path}'" in out.stderr, out.stderr
