"""Hugging Face checkpoints made from the shared GGUF models by scripts/make-hf-checkpoint.py, checked
against things we did not write: the GGUF files themselves (llama.cpp's gguf-py wrote them,
llama-quantize quantized them), gguf-py's Metadata and SpecialVocab (what convert_hf_to_gguf.py
calls to fill general.* and the special tokens), and transformers' AutoConfig / AutoTokenizer.

  - `deskside inspect DIR --json` gives the GGUF's tensor table and hyper-parameters;
  - `generate -m DIR` (F32, and BF16 in shards) gives the GGUF's greedy tokens;
  - `generate -m DIR --quantize Q8_0 / Q4_K_M` gives the tokens of llama-quantize's file of the GGUF
    and of `deskside quantize`'s;
  - models::hf_gguf_metadata(DIR) (through `gguf_tool hf-metadata`) equals the GGUF's keys, except
    the ones listed in METADATA_DIFFERENCES, each for a stated reason.
"""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter, Metadata, SpecialVocab, size_label
from required import skip_or_fail

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "make-hf-checkpoint.py"
PROMPT = "Once upon a time"

# name -> (source GGUF under ../shared/models, or the make_arch2.py architecture that rewrites it)
MODELS = {
    "synth-k": "synth-k.gguf",
    "stories260K": "stories260K.gguf",
    "synth-qwen2": "synth-qwen2.gguf",
    "synth-gemma3": "synth-gemma3.gguf",
    "synth-qwen3": "make_arch2.py qwen3",
    "synth-qwen3moe": "make_arch2.py qwen3moe",
    "synth-phi3": "make_arch2.py phi3",
    # MXFP4 experts (kept as OpenAI's _blocks/_scales in the checkpoint), Q8_0 elsewhere (dequantized)
    "synth-gptoss": "synth-gptoss-mxfp4_moe.gguf",
}


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, f"{cmd}: rc {r.returncode}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def sources(shared, tmp_path_factory):
    """name -> the F32 GGUF each checkpoint is made from."""
    out = {}
    tmp = tmp_path_factory.mktemp("gguf")
    for name, src in MODELS.items():
        if src.startswith("make_arch2.py"):
            path = tmp / f"{name}.gguf"
            run([sys.executable, shared / "models" / "make_arch2.py", src.split()[1], path])
            out[name] = path
        else:
            out[name] = shared / "models" / src
    return out


@pytest.fixture(scope="module")
def checkpoints(sources, tmp_path_factory):
    """(name, dtype) -> checkpoint directory; the BF16 ones in 3 shards."""
    base = tmp_path_factory.mktemp("hf")
    out = {}
    for name, gguf_path in sources.items():
        for dtype in ("f32", "bf16"):
            d = base / f"{name}-{dtype}"
            run([sys.executable, SCRIPT, gguf_path, d, "--dtype", dtype] + (["--shards", "3"] if dtype == "bf16" else []))
            out[name, dtype] = d
    return out


def inspect(deskside_bin, path):
    return json.loads(run([deskside_bin, "inspect", path, "--json"]).stdout)


def greedy(deskside_bin, model, *extra):
    r = run([deskside_bin, "generate", "-m", model, "-p", PROMPT, "-n", "16", "--temp", "0", "--json", *extra])
    j = json.loads(r.stdout)
    return j["prompt_tokens"], j["tokens"]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_inspect_matches_gguf(deskside_bin, sources, checkpoints, name, dtype):
    g, h = inspect(deskside_bin, sources[name]), inspect(deskside_bin, checkpoints[name, dtype])
    assert h["format"] == "safetensors"
    assert {t["name"]: t["shape"] for t in h["tensors"]} == {t["name"]: t["shape"] for t in g["tensors"]}
    # phi3's LongRoPE factors are made from config.json's lists, as F32; gpt-oss's experts stay MXFP4
    assert {t["type"] for t in h["tensors"] if not t["name"].startswith("rope_factors_")} == \
        ({dtype, "mxfp4"} if name == "synth-gptoss" else {dtype})
    gh, hh = dict(g["hparams"]), dict(h["hparams"])
    # F32 in the GGUF, the decimal in config.json
    assert hh.pop("norm_eps") == pytest.approx(gh.pop("norm_eps"), rel=1e-6)
    # HF keeps Q/K unpermuted (rotating halves) and Gemma's norms as w for 1 + w: the loader
    # records both rather than rewriting weights (models/hf_checkpoint.cpp)
    assert hh.pop("norm_weight_plus_one") == (name == "synth-gemma3")
    assert not gh.pop("norm_weight_plus_one")
    hrope, grope = hh.pop("rope"), gh.pop("rope")
    assert hrope.pop("neox") and grope.pop("neox") == (name not in ("synth-k", "stories260K"))
    assert hrope == grope
    assert hh == gh
    assert h["tokenizer"] == g["tokenizer"]


# synth-gptoss: its GGUF's Q8_0 matrices are F32 in the checkpoint (test_gptoss_checkpoint_generates_as_its_weights)
@pytest.mark.parametrize("name", [n for n in MODELS if n != "synth-gptoss"])
def test_f32_checkpoint_generates_the_gguf_tokens(deskside_bin, sources, checkpoints, name):
    assert greedy(deskside_bin, checkpoints[name, "f32"]) == greedy(deskside_bin, sources[name])


def test_bf16_sharded_checkpoint_generates(deskside_bin, sources, checkpoints):
    d = checkpoints["synth-k", "bf16"]
    assert sorted(p.name for p in d.glob("*.safetensors")) == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    # deterministic: on these weights BF16 rounding does not change the greedy path
    assert greedy(deskside_bin, d) == greedy(deskside_bin, sources["synth-k"])


@pytest.mark.parametrize("name, qtype", [("synth-k", "Q8_0"), ("synth-k", "Q4_K_M"), ("synth-qwen2", "Q8_0"),
                                         ("synth-qwen2", "Q4_K_M"), ("synth-gemma3", "Q8_0"), ("synth-qwen3moe", "Q8_0"),
                                         ("synth-qwen3moe", "Q4_K_M"), ("synth-phi3", "Q8_0"), ("synth-phi3", "Q4_K_M")])
def test_quantize_at_load_matches_llama_quantize(deskside_bin, shared, checkpoints, name, qtype):
    quantized = shared / "models" / f"{name}-{qtype.lower()}.gguf"  # llama-quantize's file of the F32 GGUF
    assert greedy(deskside_bin, checkpoints[name, "f32"], "--quantize", qtype) == greedy(deskside_bin, quantized)


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_K_M"])
def test_quantize_at_load_matches_quantize_command(deskside_bin, sources, checkpoints, tmp_path, qtype):
    # the file made from the checkpoint's source GGUF (from the checkpoint itself: test_quantize_hf.py)
    out = tmp_path / "q.gguf"
    run([deskside_bin, "quantize", sources["synth-qwen2"], out, "--type", qtype])
    assert greedy(deskside_bin, checkpoints["synth-qwen2", "f32"], "--quantize", qtype) == greedy(deskside_bin, out)


def test_quantize_at_load_refuses_a_quantized_model(deskside_bin, shared):
    model = shared / "models" / "synth-k-q8_0.gguf"
    r = subprocess.run([deskside_bin, "generate", "-m", model, "-p", "hi", "-n", "1", "--quantize", "Q4_K_M"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "already quantized" in r.stderr and str(model) in r.stderr


# ---- GGUF metadata ---------------------------------------------------------------------------

# Keys of the GGUF files that the converter's metadata for their checkpoint does not reproduce.
METADATA_DIFFERENCES = {
    # gguf-py's Metadata names a checkpoint after its directory (there is no README.md model card);
    # compared with Metadata.load itself in test_general_metadata_is_gguf_pys
    "general.name",
    # written after these keys, by the quantizer that knows the file type (hf_gguf_metadata.h)
    "general.file_type",
    # the synthetic GGUFs store "no token" as 0xFFFFFFFF; a checkpoint has no separator or
    # padding token, and the converter writes ids only for tokens that exist
    "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id",
    # convert_hf_to_gguf.py's Gemma3Model writes no pattern (llama.cpp assumes every 6th layer
    # global); the checkpoint states it in config.json (sliding_window_pattern, layer_types)
    "gemma3.attention.sliding_window_pattern",
}


def kv(path):
    r = GGUFReader(path)
    return {k: r.fields[k].contents() for k in r.fields if not k.startswith("GGUF.")}


@pytest.fixture(scope="module")
def converted_metadata(gguf_tool, checkpoints, tmp_path_factory):
    base = tmp_path_factory.mktemp("meta")
    out = {}
    for (name, dtype), d in checkpoints.items():
        path = base / f"{name}-{dtype}.gguf"
        run([gguf_tool, "hf-metadata", d, path])
        out[name, dtype] = path
    return out


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_metadata_matches_gguf(sources, checkpoints, converted_metadata, name, dtype):
    orig, conv = kv(sources[name]), kv(converted_metadata[name, dtype])
    cfg = json.loads((checkpoints[name, dtype] / "tokenizer_config.json").read_text())
    special = {int(i) for i in cfg["added_tokens_decoder"]}
    for key, value in orig.items():
        # synth-gptoss's source is llama-quantize's file, which adds its key
        if key in METADATA_DIFFERENCES or (name == "synth-gptoss" and key == "general.quantization_version"):
            continue
        assert key in conv, key
        if key in ("tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            # _create_vocab_sentencepiece: tokens in added_tokens_decoder (save_pretrained lists
            # <unk>, <s>, </s>) become CONTROL (3) with score -1000
            expected = [(-1000.0 if key.endswith("scores") else 3) if i in special else v for i, v in enumerate(value)]
            assert conv[key] == pytest.approx(expected), key
        elif isinstance(value, float):
            assert conv[key] == pytest.approx(value, rel=1e-6), key
        else:
            assert conv[key] == value, key
    assert conv["general.architecture"] == orig["general.architecture"]
    # Phi3MiniModel writes LongRoPE's attn_factor as it makes the factor tensors, before general.type
    first = ["general.architecture", "phi3.rope.scaling.attn_factor"] if name == "synth-phi3" else ["general.architecture"]
    assert list(conv)[:len(first) + 1] == first + ["general.type"]
    assert conv["tokenizer.ggml.pre"] == "default"


def test_general_metadata_is_gguf_pys(sources, checkpoints, converted_metadata):
    """general.name and general.size_label as gguf-py's Metadata gives them for the directory; the
    size label from gguf-py's count of the converted tensors (the source GGUF's: "8x..." for experts)."""
    for (name, dtype), d in checkpoints.items():
        conv = kv(converted_metadata[name, dtype])
        n_params = safetensors_params(d)
        meta = Metadata.load(None, d, None, n_params)
        assert conv["general.name"] == meta.name
        assert conv["general.size_label"] == converter_size_label(sources[name]), name


def converter_size_label(gguf_path):
    """gguf-py's size_label of GGUFWriter.get_total_parameter_count over a file's tensors."""
    w = GGUFWriter(None, "x")
    for t in GGUFReader(gguf_path).tensors:
        shape = [int(n) for n in reversed(t.shape)]
        w.add_tensor_info(t.name, shape, np.dtype(np.float32), 4 * int(np.prod(shape)))
    return size_label(*w.get_total_parameter_count())


def safetensors_params(d):
    from safetensors import safe_open

    total = 0
    for f in d.glob("*.safetensors"):
        with safe_open(f, framework="numpy") as st:
            total += sum(int(np.prod(st.get_slice(n).get_shape())) for n in st.keys())
    return total


def test_special_vocab_is_gguf_pys(gguf_tool, checkpoints, tmp_path):
    """Special ids, add_bos/add_eos and the chat template as gguf-py's SpecialVocab reads them, with a
    chat template and a generation_config sampling field added to a converted directory."""
    d = tmp_path / "with-template"
    subprocess.run(["cp", "-r", checkpoints["synth-qwen2", "f32"], d], check=True)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    gen = json.loads((d / "generation_config.json").read_text())
    gen.update(temperature=0.7, top_k=20, penalty_repeat=1.05)  # gguf 0.19 reads no repetition_penalty
    (d / "generation_config.json").write_text(json.dumps(gen))
    out = tmp_path / "m.gguf"
    run([gguf_tool, "hf-metadata", d, out])
    conv = kv(out)
    sv = SpecialVocab(d, n_vocab=len(conv["tokenizer.ggml.tokens"]))
    ids = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "sep": "seperator_token_id",
           "pad": "padding_token_id"}
    assert {k: conv[f"tokenizer.ggml.{ids[k]}"] for k in sv.special_token_ids} == sv.special_token_ids
    assert {k: conv[f"tokenizer.ggml.add_{k}_token"] for k in sv.add_special_token} == sv.add_special_token
    assert conv["tokenizer.chat_template"] == sv.chat_template
    meta = Metadata.load(None, d, None, 1)
    assert conv["general.sampling.temp"] == pytest.approx(meta.sampling_temp)
    assert conv["general.sampling.top_k"] == meta.sampling_top_k
    assert conv["general.sampling.penalty_repeat"] == pytest.approx(meta.sampling_penalty_repeat)
    keys = list(conv)
    assert keys.index("general.sampling.top_k") < keys.index("general.sampling.temp") < keys.index("general.name")


def test_transformers_reads_the_files(deskside_bin, checkpoints):
    """transformers' own readers (no model weights: torch is not needed) take the config and the
    tokenizer, and the tokenizer encodes as deskside does."""
    try:
        import transformers
    except ImportError:
        skip_or_fail("transformers is not installed (pip install -r scripts/requirements.txt)")
    for name in ("synth-k", "synth-gemma3", "synth-qwen3", "synth-qwen3moe", "synth-phi3", "synth-gptoss"):
        d = checkpoints[name, "f32"]
        cfg = transformers.AutoConfig.from_pretrained(d)
        ours = json.loads((d / "config.json").read_text())
        assert cfg.model_type == ours["model_type"] and cfg.num_key_value_heads == ours["num_key_value_heads"]
        tok = transformers.AutoTokenizer.from_pretrained(d)
        prompt_tokens, _ = greedy(deskside_bin, d)
        assert tok(PROMPT).input_ids == prompt_tokens


def test_inspect_plans_the_quantized_weights(deskside_bin, shared, checkpoints):
    """inspect --quantize places the weights as they will be: llama-quantize's file's bytes."""
    def weights(*args):
        j = json.loads(run([deskside_bin, "inspect", *args, "--json"]).stdout)
        return [d["weight_bytes"] for d in j["placement"]["devices"]]
    for name in ("synth-k", "synth-qwen3moe"):  # the latter's experts stacked from their parts first
        assert weights(checkpoints[name, "f32"], "--quantize", "Q4_K_M") == \
            weights(shared / "models" / f"{name}-q4_k_m.gguf", "--devices", "cpu")


@pytest.mark.parametrize("dir_name", ["Qwen3-0.6B", "Llama-3.1-8B-Instruct", "Mistral-7B-v0.1", "gemma-3-270m-it",
                                      "bloom-7b1", "TinyLlama-1.1B-Chat-v1.0", "Phi-3-mini-4k-instruct",
                                      "Qwen2.5-Coder-32B-Instruct-Q4_K_M", "synth-k"])
def test_general_name_parts_are_gguf_pys(gguf_tool, checkpoints, tmp_path, dir_name):
    """general.name/basename/finetune/version/size_label: gguf-py's heuristics on the directory name."""
    d = tmp_path / dir_name
    d.symlink_to(checkpoints["synth-k", "f32"])
    out = tmp_path / "m.gguf"
    run([gguf_tool, "hf-metadata", d, out])
    conv = kv(out)
    n_params = safetensors_params(d)
    meta = Metadata.load(None, d, None, n_params)
    expected = {"general.name": meta.name, "general.version": meta.version, "general.finetune": meta.finetune,
                "general.basename": meta.basename, "general.size_label": meta.size_label or size_label(n_params, 0, 0, 0)}
    assert {k: conv.get(k) for k in expected} == expected
    general = [k for k in conv if k.startswith("general.") and k in expected]
    assert general == [k for k in ("general.name", "general.version", "general.finetune", "general.basename",
                                   "general.size_label") if expected[k] is not None]


def test_gptoss_checkpoint_generates_as_its_weights(deskside_bin, sources, checkpoints, tmp_path):
    """-m DIR of the gpt-oss checkpoint gives the greedy tokens of a GGUF holding the same weights: the
    source's MXFP4 experts as they are, its Q8_0 matrices dequantized to F32 by gguf-py (what the
    checkpoint holds), written by gguf-py's GGUFWriter."""
    from gguf.quants import dequantize

    src = GGUFReader(sources["synth-gptoss"])
    out = tmp_path / "same-weights.gguf"
    w = GGUFWriter(out, "gpt-oss")
    for field in src.fields.values():
        if field.name.startswith("GGUF.") or field.name in ("general.architecture", "general.file_type"):
            continue
        value = field.contents()
        vtype = field.types[0]
        sub = field.types[-1] if vtype.name == "ARRAY" else None
        w.add_key_value(field.name, value, vtype, sub_type=sub)
    for t in src.tensors:
        if t.tensor_type.name == "Q8_0":
            values = dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)])
            w.add_tensor(t.name, np.ascontiguousarray(values, dtype=np.float32))
        else:
            w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert greedy(deskside_bin, checkpoints["synth-gptoss", "f32"]) == greedy(deskside_bin, out)


def openai_mxfp4_values(blocks, scales):
    """transformers' MXFP4 reader (integrations/mxfp4.py convert_moe_packed_tensors) where torch is
    installed, else the same steps in numpy: low nibble -> even value, high -> odd, FP4_VALUES[nibble]
    * 2**(scale - 127); out [E, in, out] as GptOssExperts multiplies."""
    try:
        import torch
        from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    except ImportError:  # (transformers' mxfp4 module imports torch; its FP4_VALUES table:)
        lut = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)
        out = np.empty(blocks.shape[:-1] + (32,), dtype=np.float32)
        out[..., 0::2] = lut[blocks & 0x0F]
        out[..., 1::2] = lut[blocks >> 4]
        out = np.ldexp(out, (scales.astype(np.int32) - 127)[..., None])
        return out.reshape(*blocks.shape[:2], -1).transpose(0, 2, 1)
    return convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales), dtype=torch.float32).numpy()


def test_gptoss_experts_are_openais_mxfp4(sources, checkpoints):
    """The checkpoint's _blocks/_scales, read as transformers reads OpenAI's MXFP4, are the GGUF's
    experts as gguf-py dequantizes them, gate in even rows and up in odd ones of gate_up_proj
    (transformers' GptOssExperts: gate_up[..., ::2], gate_up[..., 1::2])."""
    from gguf.quants import dequantize
    from safetensors.numpy import load_file

    hf = load_file(checkpoints["synth-gptoss", "f32"] / "model.safetensors")
    gguf = {t.name: t for t in GGUFReader(sources["synth-gptoss"]).tensors}

    def experts(name):  # [E, out, in]
        t = gguf[name]
        return dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)])

    for layer in range(2):
        p = f"model.layers.{layer}.mlp.experts."
        for proj, parts in (("gate_up_proj", ("ffn_gate_exps", "ffn_up_exps")), ("down_proj", ("ffn_down_exps",))):
            w = openai_mxfp4_values(hf[p + proj + "_blocks"], hf[p + proj + "_scales"])  # [E, in, out]
            if len(parts) == 2:
                gate, up = w[..., ::2], w[..., 1::2]
                assert np.array_equal(gate.transpose(0, 2, 1), experts(f"blk.{layer}.{parts[0]}.weight"))
                assert np.array_equal(up.transpose(0, 2, 1), experts(f"blk.{layer}.{parts[1]}.weight"))
            else:
                assert np.array_equal(w.transpose(0, 2, 1), experts(f"blk.{layer}.{parts[0]}.weight"))
