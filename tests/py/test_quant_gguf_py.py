"""quant/'s reference TQ1_0, TQ2_0 and MXFP4 against llama.cpp's Python implementation (gguf.quants).

Bit-exact both ways: our dequantizer on every tensor of these types in the shared model files (made by
llama.cpp), on gguf-py's quantized random data and on random block bytes (every code and scale a file
may hold); our quantizer against gguf.quants.quantize on the same data. The C++ side runs through
tests/tools/quant_tool.
"""
import subprocess

import numpy as np
import pytest
from gguf import GGUFReader, GGMLQuantizationType as T
from gguf import quants

TYPES = {"tq1_0": T.TQ1_0, "tq2_0": T.TQ2_0, "mxfp4": T.MXFP4}
BLOCK = {"tq1_0": 256, "tq2_0": 256, "mxfp4": 32}


def tool(quant_tool, tmp_path, mode, arg, data: bytes) -> bytes:
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    src.write_bytes(data)
    r = subprocess.run([str(quant_tool), mode, arg, str(src), str(dst)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return dst.read_bytes()


def first_difference(a: np.ndarray, b: np.ndarray) -> str:
    bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
    return "" if bad.size == 0 else f"{bad.size} differ, first at {bad[0]}: ours {a[bad[0]]!r}, gguf {b[bad[0]]!r}"


@pytest.mark.parametrize("model", ["synth-k-tq2_0.gguf", "synth-gptoss-mxfp4_moe.gguf"])
def test_model_tensors_dequantize_as_gguf_py(quant_tool, shared, tmp_path, model):
    path = shared / "models" / model
    checked = 0
    for t in GGUFReader(path).tensors:
        if t.tensor_type not in TYPES.values():
            continue
        want = quants.dequantize(t.data, t.tensor_type).astype(np.float32).ravel()
        out = tmp_path / "out.f32"
        r = subprocess.run([str(quant_tool), "tensor", str(path), t.name, str(out)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        got = np.frombuffer(out.read_bytes(), dtype=np.float32)
        assert got.size == want.size == int(np.prod(t.shape)), t.name
        assert first_difference(got, want) == "", t.name
        checked += 1
    # synth-k-tq2_0: 28 TQ2_0 matrices; gpt-oss: 6 MXFP4 expert stacks [256, 256, 8].
    assert checked == (28 if "tq2_0" in model else 6)


def awkward_values(block: int, rng: np.random.Generator) -> np.ndarray:
    """Rows that reach the quantizers' edge cases: ties between two levels, maxima at and just below
    powers of two (the MXFP4 exponent), zero and constant blocks, tiny and huge magnitudes."""
    rows = []
    unit = 2.0 ** rng.integers(-8, 8, size=(64, 1))
    rows.append(unit * rng.integers(-24, 25, size=(64, block)) / 4)  # quarter steps: MXFP4 and ternary ties
    top = np.float32(2.0) ** rng.integers(-6, 6, size=(32, 1)).astype(np.float32)
    below = np.nextafter(top, np.float32(0))
    x = rng.uniform(-1, 1, size=(64, block)).astype(np.float32) * np.concatenate([top, below])
    x[:, 0] = np.concatenate([top, below])[:, 0]
    rows.append(x)
    rows.append(np.zeros((2, block)))
    rows.append(np.full((2, block), -0.375))
    rows.append(rng.standard_normal((4, block)) * np.array([[1e-6], [1e-3], [1e3], [1e4]]))
    return np.concatenate(rows).astype(np.float32)


@pytest.mark.parametrize("name", sorted(TYPES))
def test_quantize_and_dequantize_as_gguf_py(quant_tool, tmp_path, name):
    rng = np.random.default_rng(20261202)
    block = BLOCK[name]
    x = np.concatenate([rng.standard_normal((128, 2 * block)).reshape(-1, block).astype(np.float32),
                        awkward_values(block, rng)])
    want_bytes = quants.quantize(x, TYPES[name])
    ours = tool(quant_tool, tmp_path, "quantize", name, x.tobytes())
    assert ours == want_bytes.tobytes(), "quantized blocks differ from gguf.quants.quantize"

    want = quants.dequantize(want_bytes, TYPES[name]).astype(np.float32).ravel()
    got = np.frombuffer(tool(quant_tool, tmp_path, "dequantize", name, want_bytes.tobytes()), dtype=np.float32)
    assert first_difference(got, want) == ""


@pytest.mark.parametrize("name", sorted(TYPES))
def test_random_blocks_dequantize_as_gguf_py(quant_tool, tmp_path, name):
    """Every byte value in every position: TQ1_0 bytes above 242 (no quantizer writes them), all 256
    E8M0 exponents (subnormal halves at 0 and 1, 2^127 at 255)."""
    rng = np.random.default_rng(7)
    n_blocks = 4096
    size = quants.GGML_QUANT_SIZES[TYPES[name]][1]
    blocks = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if name == "mxfp4":
        blocks[:256, 0] = np.arange(256, dtype=np.uint8)
    else:  # the fp16 scale (last two bytes) finite: a NaN would compare unequal to itself
        d = rng.uniform(-2, 2, size=n_blocks).astype(np.float16)
        blocks[:, -2:] = d.view(np.uint8).reshape(n_blocks, 2)
    with np.errstate(over="ignore"):  # e = 255 times level 12 is inf, on both sides
        want = quants.dequantize(blocks, TYPES[name]).astype(np.float32).ravel()
    got = np.frombuffer(tool(quant_tool, tmp_path, "dequantize", name, blocks.tobytes()), dtype=np.float32)
    assert first_difference(got, want) == ""
