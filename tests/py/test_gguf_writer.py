"""Files written by deskside's GGUF writer, read back by llama.cpp's own reader (gguf on PyPI)."""
import json
import subprocess

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValueType


def field_value(field):
    """A metadata field as plain Python values (nested arrays as lists)."""
    return field.contents()


def run_tool(tool, *args):
    r = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize("name", ["stories260K.gguf", "synth-k-q4_k_m.gguf", "synth-gemma3-q6_k.gguf"])
def test_copy_reads_back_identically(gguf_tool, shared, tmp_path, name):
    src = shared / "models" / name
    out = tmp_path / "copy.gguf"
    run_tool(gguf_tool, "copy", src, out)
    a, b = GGUFReader(src), GGUFReader(out)
    assert list(a.fields) == list(b.fields)
    for key in a.fields:
        if key.startswith("GGUF."):
            continue
        fa, fb = a.fields[key], b.fields[key]
        assert fa.types == fb.types, key
        assert field_value(fa) == field_value(fb), key
    assert [t.name for t in a.tensors] == [t.name for t in b.tensors]
    for ta, tb in zip(a.tensors, b.tensors):
        assert ta.tensor_type == tb.tensor_type
        assert list(ta.shape) == list(tb.shape)
        assert ta.data.tobytes() == tb.data.tobytes(), ta.name


SPEC = {
    "metadata": [
        ["general.architecture", "string", "llama"],
        ["general.alignment", "u32", 64],
        ["u8", "u8", 255], ["i8", "i8", -128], ["u16", "u16", 65535], ["i16", "i16", -32768],
        ["u32", "u32", 4294967295], ["i32", "i32", -2147483648],
        ["u64", "u64", 18446744073709551615], ["i64", "i64", -9223372036854775808],
        ["f32", "f32", 0.25], ["f64", "f64", 1e-300], ["bool", "bool", True],
        ["unicode", "string", "naïve ☃ \u4e2d\u6587"],
        ["strings", {"array": "string"}, ["a", "", "ccc"]],
        ["floats", {"array": "f32"}, [1.5, -2.0]],
        ["nested", {"array": {"array": "i32"}}, [[1, 2, 3], [], [-4]]],
    ],
    "tensors": [
        ["vec", [5], [1, 2, 3, 4, 5]],
        ["mat", [2, 3], [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]],
    ],
}


def test_every_value_type(gguf_tool, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    out = tmp_path / "all.gguf"
    run_tool(gguf_tool, "from-json", spec, out)
    r = GGUFReader(out)
    assert r.alignment == 64
    assert r.data_offset % 64 == 0
    for key, typ, value in SPEC["metadata"]:
        got = field_value(r.fields[key])
        if typ in ("f32",):
            assert got == pytest.approx(value)
        elif isinstance(typ, dict) and typ["array"] == "f32":
            assert got == pytest.approx(value)
        elif key != "nested":
            assert got == value, key
    # gguf-py flattens nested arrays in contents(); the raw parts keep each inner array's
    # element type and count: outer (type ARRAY, count 3), then per inner array (INT32, n, items).
    nested = r.fields["nested"]
    assert nested.types == [GGUFValueType.ARRAY, GGUFValueType.ARRAY, GGUFValueType.INT32]
    parts = [p.tolist() for p in nested.parts[3:]]
    assert parts == [[9], [3], [5], [3], [1], [2], [3], [5], [0], [5], [1], [-4]]
    tensors = {t.name: t for t in r.tensors}
    np.testing.assert_array_equal(tensors["vec"].data, np.arange(1, 6, dtype=np.float32))
    assert list(tensors["mat"].shape) == [2, 3]
    np.testing.assert_array_equal(tensors["mat"].data.reshape(-1), np.array(SPEC["tensors"][1][2], dtype=np.float32))
    for t in r.tensors:
        assert (t.data_offset - r.data_offset) % 64 == 0
