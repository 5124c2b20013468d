"""The low-bit i-quants (IQ2_XXS ... IQ1_M) against llama.cpp's own code: every tensor of the
synth-k-iq* files (made by llama-quantize) dequantized by deskside's quant::to_float equals
gguf.quants.dequantize (gguf-py, on PyPI) bit for bit, and the committed codebook tables equal
what scripts/gen-iq-tables.py makes of that package now."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGUFReader, GGMLQuantizationType
from gguf.quants import dequantize

REPO = pathlib.Path(__file__).resolve().parents[2]

LOW_BIT = {
    GGMLQuantizationType.IQ2_XXS, GGMLQuantizationType.IQ2_XS, GGMLQuantizationType.IQ2_S,
    GGMLQuantizationType.IQ3_XXS, GGMLQuantizationType.IQ3_S, GGMLQuantizationType.IQ1_S,
    GGMLQuantizationType.IQ1_M,
}


@pytest.mark.parametrize("suffix", ["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"])
def test_dequantize_matches_gguf_py(gguf_tool, shared, tmp_path, suffix):
    src = shared / "models" / f"synth-k-{suffix}.gguf"
    out = tmp_path / "values.f32"
    r = subprocess.run([str(gguf_tool), "dequantize", str(src), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ours = np.fromfile(out, dtype=np.float32)
    at = 0
    low_bit = 0
    for t in GGUFReader(src).tensors:
        n = int(np.prod(t.shape))
        got = ours[at : at + n]
        at += n
        want = dequantize(t.data, t.tensor_type).reshape(-1).astype(np.float32)
        assert got.tobytes() == want.tobytes(), f"{t.name} ({t.tensor_type.name}): first difference at element " \
            f"{int(np.argmax(got.view(np.uint32) != want.view(np.uint32)))}"
        low_bit += t.tensor_type in LOW_BIT
    assert at == ours.size
    assert low_bit >= 10  # most of the 4 layers' matrices are in the file's low-bit type


def test_committed_tables_are_generated():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen-iq-tables.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
