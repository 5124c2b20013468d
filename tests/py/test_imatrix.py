"""`deskside imatrix` against llama-imatrix: ../shared/models/synth-k.imatrix was made by
`llama-imatrix -m synth-k.gguf -f ../reference/ppl-text-gpl3.txt -c 128 -b 128` (see
../shared/models/README.md). Our file is read with gguf-py (llama.cpp's own reader) and must have
the same keys, value types, tensor names, types and shapes, the same chunk count and row counts,
and per-column mean squares (in_sum2 / counts) within a stated tolerance; llama-quantize must accept it.
"""
import pathlib
import subprocess

import gguf
import numpy as np
import pytest

from required import skip_or_fail

# Our activations are llama.cpp's up to float rounding: the kernels sum in another order, so an
# activation differs in its last bits (relative ~1e-7 .. 1e-6). Both programs keep K and V in an
# F16 cache, and a last-bit difference can flip the F16 rounding of a cached element, a relative
# change of up to 2^-11 (4.9e-4); the attention output (attn_output's input) and what follows inherit
# such flips, and a mean square (a sum of squares) at most doubles a relative change: 2 * 2^-11 ~ 1e-3.
# Nothing cancels (the sums are of positive squares, accumulated in float in the same order by both),
# so no column may differ by more. Measured: at most 3.8e-4 (attn_output), medians below 7e-5, and
# layer 0's attn_q/k/v (normed embeddings, before any attention) equal bit for bit (docs/SCORING.md).
REL_TOL = 1e-3
MEDIAN_TOL = 1e-4


def read(path: pathlib.Path):
    r = gguf.GGUFReader(str(path))
    fields = {k: (f.types, f.contents()) for k, f in r.fields.items() if not k.startswith("GGUF.")}
    tensors = {t.name: t for t in r.tensors}
    return fields, tensors


@pytest.fixture(scope="module")
def reference(shared):
    path = shared / "models" / "synth-k.imatrix"
    if not path.exists():
        skip_or_fail(f"{path} is absent")
    return path


@pytest.fixture(scope="module")
def ours(deskside_bin, shared, reference, tmp_path_factory):
    out = tmp_path_factory.mktemp("imatrix") / "synth-k.imatrix"
    text = shared / "reference" / "ppl-text-gpl3.txt"
    r = subprocess.run(
        [str(deskside_bin), "imatrix", "-m", str(shared / "models" / "synth-k.gguf"), "--text", str(text), "-o",
         str(out), "-c", "128", "-t", "2"],
        capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    return out


def test_reference_file_as_gguf_py_reads_it(reference):
    fields, tensors = read(reference)
    assert fields["general.type"][1] == "imatrix"
    assert fields["imatrix.chunk_count"][1] == 173
    assert fields["imatrix.chunk_size"][1] == 128
    assert len(tensors) == 56  # 28 entries: in_sum2 and counts


def test_same_keys_tensors_and_shapes(reference, ours):
    ref_fields, ref_tensors = read(reference)
    our_fields, our_tensors = read(ours)
    assert list(our_fields) == list(ref_fields)
    for key in ref_fields:
        assert our_fields[key][0] == ref_fields[key][0], key  # value types, arrays' element types included
    assert our_fields["imatrix.chunk_count"][1] == ref_fields["imatrix.chunk_count"][1]
    assert our_fields["imatrix.chunk_size"][1] == ref_fields["imatrix.chunk_size"][1]
    assert list(our_tensors) == list(ref_tensors)  # same names, same order
    for name, t in ref_tensors.items():
        assert our_tensors[name].tensor_type == t.tensor_type, name
        assert list(our_tensors[name].shape) == list(t.shape), name


def test_counts_and_mean_squares_match_llama_imatrix(reference, ours):
    _, ref = read(reference)
    _, our = read(ours)
    worst = 0.0
    for name in ref:
        if not name.endswith(".in_sum2"):
            continue
        base = name[: -len(".in_sum2")]
        ref_counts = np.asarray(ref[base + ".counts"].data, dtype=np.float64)
        our_counts = np.asarray(our[base + ".counts"].data, dtype=np.float64)
        np.testing.assert_array_equal(our_counts, ref_counts, err_msg=base)
        ref_ms = np.asarray(ref[name].data, dtype=np.float64) / ref_counts
        our_ms = np.asarray(our[name].data, dtype=np.float64) / our_counts
        rel = np.abs(our_ms - ref_ms) / ref_ms
        worst = max(worst, float(rel.max()))
        assert rel.max() < REL_TOL, f"{base}: column {int(rel.argmax())} differs by {rel.max():.3g}"
        assert np.median(rel) < MEDIAN_TOL, f"{base}: median relative difference {np.median(rel):.3g}"
    print(f"largest relative difference of a column's mean square: {worst:.3g}")


def test_llama_quantize_takes_our_imatrix(peer_bin, shared, ours, tmp_path):
    out = tmp_path / "q4_k_m.gguf"
    r = subprocess.run(
        [str(peer_bin / "llama-quantize"), "--imatrix", str(ours), str(shared / "models" / "synth-k.gguf"), str(out),
         "Q4_K_M", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "loaded 28 importance matrix entries" in r.stdout + r.stderr
