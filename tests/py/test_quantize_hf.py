"""`deskside quantize HF_DIR` against quantizing the GGUF the checkpoint was made from: the shared
GGUFs are what llama.cpp's converter writes (Q/K permuted for llama, Gemma's norms as 1 + w, norms
F32), and scripts/make-hf-checkpoint.py undoes exactly that, so converting the checkpoint back and
quantizing it must give, tensor for tensor, the bytes `deskside quantize SOURCE.gguf` gives (which
are llama-quantize's, tests/py/test_quantize.py). The metadata is hf_gguf_metadata's (checked against
gguf-py in tests/py/test_hf_export.py) and agrees with the GGUF's but for the keys listed there. The
files load in the peer's llama-completion with deskside's greedy tokens.
"""
import json
import subprocess
import sys

import numpy as np
import pytest
from test_hf_export import METADATA_DIFFERENCES, MODELS, SCRIPT, greedy, kv, run, sources  # noqa: F401 (fixture)
from test_quantize import assert_generates_as_llama

QUANT_KEYS = ["general.quantization_version", "general.file_type"]
TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q6_K", "IQ4_XS"]
# synth-gptoss: its source is quantized, so test_gptoss_checkpoint_requantizes_as_its_gguf
NAMES = [n for n in MODELS if n not in ("synth-qwen3", "synth-gptoss")]


@pytest.fixture(scope="module")
def checkpoint(sources, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    """(name, dtype) -> checkpoint directory, made on first use."""
    base = tmp_path_factory.mktemp("hfq")
    made = {}

    def get(name, dtype):
        if (name, dtype) not in made:
            d = base / f"{name}-{dtype}"
            run([sys.executable, SCRIPT, sources[name], d, "--dtype", dtype])
            made[name, dtype] = d
        return made[name, dtype]

    return get


def quantize(deskside_bin, src, out, qtype):
    run([deskside_bin, "quantize", src, out, "--type", qtype, "--threads", 2])
    return out


def tensors(path):
    from gguf import GGUFReader

    return [(t.name, t.tensor_type.name, list(t.shape), t.data.tobytes()) for t in GGUFReader(path).tensors]


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("name", NAMES)
def test_equals_quantizing_the_gguf(deskside_bin, gguf_tool, sources, checkpoint, tmp_path, name, qtype):  # noqa: F811
    d = checkpoint(name, "f32")
    ours = quantize(deskside_bin, d, tmp_path / "hf.gguf", qtype)
    theirs = quantize(deskside_bin, sources[name], tmp_path / "gguf.gguf", qtype)
    a, b = tensors(ours), tensors(theirs)
    assert [t[:3] for t in a] == [t[:3] for t in b]
    assert [t[0] for t in a if t not in b] == []

    mine, gguf = kv(ours), kv(theirs)
    # the converter's keys, then the quantizer's, as for a GGUF input
    meta = tmp_path / "meta.gguf"
    run([gguf_tool, "hf-metadata", d, meta])
    expected_keys = [k for k in kv(meta) if k not in QUANT_KEYS] + QUANT_KEYS
    assert list(mine) == expected_keys
    assert {k: mine[k] for k in QUANT_KEYS} == {k: gguf[k] for k in QUANT_KEYS}
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    special = {int(i) for i in cfg["added_tokens_decoder"]}  # the converter makes these CONTROL, score -1000
    for key, value in gguf.items():
        if key in METADATA_DIFFERENCES - {"general.file_type"}:
            continue
        assert key in mine, key
        if key == "tokenizer.ggml.scores":
            value = [-1000.0 if i in special else v for i, v in enumerate(value)]
        elif key == "tokenizer.ggml.token_type":
            value = [3 if i in special else v for i, v in enumerate(value)]
        if isinstance(value, float) or key == "tokenizer.ggml.scores":
            assert mine[key] == pytest.approx(value, rel=1e-6), key
        else:
            assert mine[key] == value, key


def bf16_bits(w):
    """F32 -> BF16 bits, rounding to nearest even, as the checkpoint stores its weights."""
    bits = np.ascontiguousarray(w, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(w):
    return (bf16_bits(w).astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("name", ["synth-k", "synth-qwen2", "synth-gemma3", "synth-qwen3moe", "synth-phi3"])
def test_bf16_checkpoint_converts_as_the_converter(deskside_bin, sources, checkpoint, tmp_path, name):  # noqa: F811
    """From the source GGUF's weights w: matrices stay BF16 (bf16(w), rows back in GGUF order, experts
    stacked back); 1-D tensors and MoE routers become F32, read as F32 before Gemma's +1 (the checkpoint
    holds bf16(w - 1)); LongRoPE factors come from config.json unrounded."""
    from gguf import GGUFReader

    d = checkpoint(name, "bf16")
    out = quantize(deskside_bin, d, tmp_path / "bf16.gguf", "BF16")
    source = {t.name: np.array(t.data, dtype=np.float32) for t in GGUFReader(sources[name]).tensors}
    got = {t.name: t for t in GGUFReader(out).tensors}
    assert sorted(got) == sorted(source)
    for tname, w in source.items():
        t = got[tname]
        if tname.startswith("rope_factors_"):
            assert t.tensor_type.name == "F32" and t.data.tobytes() == w.tobytes(), tname
        elif tname.endswith(".ffn_gate_inp.weight"):
            assert t.tensor_type.name == "F32" and t.data.tobytes() == bf16_value(w).tobytes(), tname
        elif w.ndim > 1:
            assert t.tensor_type.name == "BF16" and t.data.tobytes() == bf16_bits(w).tobytes(), tname
        elif name == "synth-gemma3" and tname.endswith("norm.weight"):
            stored = bf16_value(w - np.float32(1))
            assert t.tensor_type.name == "F32" and t.data.tobytes() == (stored + np.float32(1)).tobytes(), tname
        else:
            assert t.tensor_type.name == "F32" and t.data.tobytes() == bf16_value(w).tobytes(), tname
    # quantized from the checkpoint or from that file: the same tensors
    hf, gguf = (quantize(deskside_bin, src, tmp_path / f"{k}.gguf", "Q4_K_M") for k, src in (("a", d), ("b", out)))
    assert tensors(hf) == tensors(gguf)


# synth-gemma3 is left out: the converter writes add_space_prefix false for Gemma (Gemma3Model.set_vocab),
# while this synthetic checkpoint's tokenizer prepends a space, so the file tokenizes the prompt differently
@pytest.mark.parametrize("name", ["synth-k", "synth-qwen2"])
def test_bf16_checkpoint_file_generates_as_quantize_at_load(deskside_bin, checkpoint, tmp_path, name):
    d = checkpoint(name, "bf16")
    out = quantize(deskside_bin, d, tmp_path / "q8.gguf", "Q8_0")
    assert greedy(deskside_bin, out) == greedy(deskside_bin, d, "--quantize", "Q8_0")


# synth-phi3 is left out: its directory name puts "phi3" into general.name, and llama.cpp then looks up
# Phi-3's special tokens, which this vocabulary lacks (../shared/models/README.md)
@pytest.mark.parametrize("name, qtype", [("synth-k", "Q4_K_M"), ("stories260K", "Q8_0"), ("synth-qwen2", "Q8_0"),
                                         ("synth-gemma3", "Q8_0"), ("synth-qwen3moe", "Q8_0")])
def test_llama_completion_generates_as_deskside(deskside_bin, peer_bin, checkpoint, tmp_path, name, qtype):
    out = quantize(deskside_bin, checkpoint(name, "f32"), tmp_path / "q.gguf", qtype)
    assert_generates_as_llama(deskside_bin, peer_bin, out)


@pytest.mark.parametrize("name", ["synth-qwen3moe", "synth-phi3"])
def test_checkpoint_of_a_q8_0_file_requantizes_to_it(deskside_bin, shared, tmp_path, name):
    """make-hf-checkpoint.py dequantizes a quantized GGUF (gguf-py's gguf.quants.dequantize); Q8_0 values
    quantize back to themselves, so the checkpoint's Q8_0 file is llama-quantize's file, byte for byte."""
    source = shared / "models" / f"{name}-q8_0.gguf"
    d = tmp_path / name
    run([sys.executable, SCRIPT, source, d, "--dtype", "f32"])
    ours = quantize(deskside_bin, d, tmp_path / "q8.gguf", "Q8_0")
    assert sorted(tensors(ours)) == sorted(tensors(source))


@pytest.mark.parametrize("qtype", ["Q8_0", "F32", "Q4_K_M"])
def test_gptoss_checkpoint_requantizes_as_its_gguf(deskside_bin, sources, checkpoint, tmp_path, qtype):  # noqa: F811
    """The gpt-oss checkpoint of synth-gptoss-mxfp4_moe.gguf (experts in OpenAI's MXFP4 layout, Q8_0
    matrices dequantized) quantizes with --allow-requantize to the bytes the GGUF quantizes to: the
    experts' MXFP4 blocks come back as GGUF's, so they dequantize alike (F32 shows every value). The
    tensors are compared by name: the source GGUF's order is not the converter's."""
    d = checkpoint("synth-gptoss", "f32")
    ours, theirs = (tmp_path / "hf.gguf", tmp_path / "gguf.gguf")
    run([deskside_bin, "quantize", d, ours, "--type", qtype, "--allow-requantize", "--threads", 2])
    run([deskside_bin, "quantize", sources["synth-gptoss"], theirs, "--type", qtype, "--allow-requantize",
         "--threads", 2])
    assert sorted(tensors(ours)) == sorted(tensors(theirs))
