"""Hugging Face checkpoint directories written with the safetensors package, read by `deskside
inspect DIR --json`, and compared with what llama.cpp's gguf-py reads from GGUF files of the same
models (tensor names, order, shapes, hyperparameters, tokenizer ids).

Each checkpoint is built from the dimensions of a GGUF under ../shared/models, with the Hugging
Face module names spelled out here (transformers' modeling_llama/qwen2/gemma3.py), so the name
and shape mapping is checked against llama.cpp's converter output rather than against itself.
"""
import json
import math
import shutil
import struct
import subprocess

import numpy as np
import pytest
from gguf import GGUFReader
from safetensors import TensorSpec, serialize_file

DTYPES = {"F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2)}


def gguf_facts(path):
    r = GGUFReader(path)
    meta = {k: r.fields[k].contents() for k in r.fields if not k.startswith("tokenizer.ggml.") or k.endswith("_id")}
    tensors = [(t.name, [int(d) for d in t.shape]) for t in r.tensors]
    return meta, tensors


def hf_tensors(family, hp, lm_head):
    """(name, row-major shape) of every tensor a transformers checkpoint of `family` holds."""
    e, ff, v, hd = hp["n_embd"], hp["n_ff"], hp["n_vocab"], hp["head_dim"]
    q, kv = hp["n_head"] * hd, hp["n_head_kv"] * hd
    out = [("model.embed_tokens.weight", [v, e])]
    for i in range(hp["n_layer"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", [e]), (p + "self_attn.q_proj.weight", [q, e]),
                (p + "self_attn.k_proj.weight", [kv, e]), (p + "self_attn.v_proj.weight", [kv, e]),
                (p + "self_attn.o_proj.weight", [e, q]), (p + "post_attention_layernorm.weight", [e]),
                (p + "mlp.gate_proj.weight", [ff, e]), (p + "mlp.up_proj.weight", [ff, e]),
                (p + "mlp.down_proj.weight", [e, ff])]
        if family == "qwen2":
            out += [(p + "self_attn.q_proj.bias", [q]), (p + "self_attn.k_proj.bias", [kv]), (p + "self_attn.v_proj.bias", [kv])]
        if family == "gemma3":
            out += [(p + "self_attn.q_norm.weight", [hd]), (p + "self_attn.k_norm.weight", [hd]),
                    (p + "pre_feedforward_layernorm.weight", [e]), (p + "post_feedforward_layernorm.weight", [e])]
    out.append(("model.norm.weight", [e]))
    if lm_head:
        out.append(("lm_head.weight", [v, e]))
    return sorted(out)  # save_pretrained order is not GGUF order; the loader must sort


def write_safetensors(path, tensors, dtype, seed=0, metadata=None):
    """Writes `tensors` [(name, shape)] with the safetensors package; BF16 as raw bit patterns."""
    rng = np.random.default_rng(seed)
    np_name, _ = DTYPES[dtype]
    arrays = {}
    for name, shape in tensors:
        x = rng.standard_normal(shape, dtype=np.float32)
        arrays[name] = (x.view(np.uint32) >> 16).astype(np.uint16) if dtype == "BF16" else x.astype(np_name)
    specs = {n: TensorSpec(dtype=np_name, shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes) for n, a in arrays.items()}
    serialize_file(specs, str(path), metadata or {"format": "pt"})


def write_checkpoint(d, config, tensors, dtype, shards=1):
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config, indent=2))
    if shards == 1:
        write_safetensors(d / "model.safetensors", tensors, dtype)
        return d
    weight_map = {}
    per = math.ceil(len(tensors) / shards)
    for k in range(shards):
        part = tensors[k * per:(k + 1) * per]
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(d / fname, part, dtype, seed=k)
        weight_map.update({n: fname for n, _ in part})
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return d


def inspect(deskside_bin, d):
    r = subprocess.run([str(deskside_bin), "inspect", str(d), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def inspect_error(deskside_bin, d):
    r = subprocess.run([str(deskside_bin), "inspect", str(d), "--json"], capture_output=True, text=True)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)  # a clean error, not a crash
    assert r.stdout == ""
    return r.stderr


# GGUF file -> (transformers family, config.json). The config states the GGUF's hyperparameters
# in transformers' field names.
def config_for(family, meta, tensors):
    a = meta["general.architecture"]
    g = lambda key, default=None: meta.get(f"{a}.{key}", default)
    emb = dict(tensors)["token_embd.weight"]
    cfg = {
        "model_type": {"gemma3": "gemma3_text"}.get(family, family),
        "num_hidden_layers": g("block_count"), "hidden_size": g("embedding_length"),
        "num_attention_heads": g("attention.head_count"), "num_key_value_heads": g("attention.head_count_kv"),
        "intermediate_size": g("feed_forward_length"), "vocab_size": emb[1],
        "max_position_embeddings": g("context_length"), "rms_norm_eps": g("attention.layer_norm_rms_epsilon"),
        "rope_theta": g("rope.freq_base", 10000.0),
        "tie_word_embeddings": "output.weight" not in dict(tensors),
    }
    if family == "gemma3":
        cfg.update(head_dim=g("attention.key_length"), sliding_window=g("attention.sliding_window"),
                   sliding_window_pattern=g("attention.sliding_window_pattern"), rope_local_base_freq=g("rope.freq_base_swa"))
    return cfg


def hparams_from_gguf(meta, tensors):
    a = meta["general.architecture"]
    g = lambda key, default=None: meta.get(f"{a}.{key}", default)
    n_head = g("attention.head_count")
    head_dim = g("attention.key_length", g("embedding_length") // n_head)
    return {"n_layer": g("block_count"), "n_embd": g("embedding_length"), "n_head": n_head,
            "n_head_kv": g("attention.head_count_kv"), "head_dim": head_dim, "n_ff": g("feed_forward_length"),
            "n_ctx_train": g("context_length"), "n_vocab": dict(tensors)["token_embd.weight"][1]}


CASES = [("gemma3", "synth-gemma3.gguf"), ("qwen2", "synth-qwen2.gguf"), ("llama", "synth-k.gguf")]


@pytest.mark.parametrize("family,gguf_name", CASES)
@pytest.mark.parametrize("dtype,shards", [("F32", 1), ("F16", 2), ("BF16", 3)])
def test_checkpoint_matches_gguf(deskside_bin, shared, tmp_path, family, gguf_name, dtype, shards):
    meta, gguf_tensors = gguf_facts(shared / "models" / gguf_name)
    hp = hparams_from_gguf(meta, gguf_tensors)
    config = config_for(family, meta, gguf_tensors)
    lm_head = "output.weight" in dict(gguf_tensors)
    d = write_checkpoint(tmp_path / "ckpt", config, hf_tensors(family, hp, lm_head), dtype, shards)
    j = inspect(deskside_bin, d)

    assert j["format"] == "safetensors"
    assert j["architecture"] == meta["general.architecture"]
    assert [(t["name"], t["shape"]) for t in j["tensors"]] == gguf_tensors
    bytes_per = DTYPES[dtype][1]
    for t in j["tensors"]:
        assert t["type"] == dtype.lower()
        assert t["bytes"] == math.prod(t["shape"]) * bytes_per
    assert j["file_size"] == sum(p.stat().st_size for p in d.glob("*.safetensors"))

    h = j["hparams"]
    for key, want in hp.items():
        assert h[key] == want, key
    a = meta["general.architecture"]
    assert h["norm_eps"] == pytest.approx(meta[f"{a}.attention.layer_norm_rms_epsilon"], rel=1e-6)
    assert h["rope"]["freq_base"] == meta.get(f"{a}.rope.freq_base", 10000.0)
    assert h["rope"]["n_rot"] == hp["head_dim"]
    assert h["rope"]["neox"] is True  # HF Q/K are not permuted, whatever the GGUF architecture
    assert h["tied_embeddings"] == (not lm_head)
    assert h["sliding_window"] == meta.get(f"{a}.attention.sliding_window", 0)
    if family == "gemma3":
        assert h["sliding_window_pattern"] == meta[f"{a}.attention.sliding_window_pattern"]
        assert h["rope"]["freq_base_swa"] == meta[f"{a}.rope.freq_base_swa"]


def test_mistral_and_multimodal_gemma3_configs(deskside_bin, tmp_path):
    hp = {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_head_kv": 2, "head_dim": 16, "n_ff": 96, "n_vocab": 50}
    mistral = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 64,
               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 50,
               "max_position_embeddings": 1024, "sliding_window": 128,
               "rope_scaling": {"type": "linear", "factor": 2.0}}
    j = inspect(deskside_bin, write_checkpoint(tmp_path / "m", mistral, hf_tensors("llama", hp, True), "BF16"))
    assert j["architecture"] == "llama"
    assert j["hparams"]["sliding_window"] == 128 and j["hparams"]["sliding_window_pattern"] == 0
    assert j["hparams"]["rope"]["scaling"] == "linear" and j["hparams"]["rope"]["scaling_factor"] == 2.0
    assert j["hparams"]["norm_eps"] == pytest.approx(1e-6)  # MistralConfig's default

    # Gemma3ForConditionalGeneration: text weights under "language_model.", a vision tower beside.
    ghp = dict(hp, n_head=8, n_head_kv=4, head_dim=256)  # Gemma3TextConfig defaults
    tensors = [("language_model." + n, s) for n, s in hf_tensors("gemma3", ghp, False)]
    tensors += [("vision_tower.vision_model.post_layernorm.weight", [8]), ("multi_modal_projector.mm_soft_emb_norm.weight", [8])]
    cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
           "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                           "vocab_size": 50, "sliding_window": 16, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}}
    j = inspect(deskside_bin, write_checkpoint(tmp_path / "g", cfg, tensors, "F16"))
    h = j["hparams"]
    assert j["architecture"] == "gemma3"
    assert (h["n_head"], h["n_head_kv"], h["head_dim"], h["n_ctx_train"]) == (8, 4, 256, 131072)
    assert (h["sliding_window"], h["sliding_window_pattern"]) == (16, 6)
    assert h["rope"]["freq_base"] == 1e6 and h["rope"]["freq_base_swa"] == 1e4
    assert h["tied_embeddings"] is True
    assert j["n_tensors"] == 2 + 2 * 13
    assert not any("vision" in t["name"] or "mm_" in t["name"] for t in j["tensors"])


def tokenizer_checkpoint(tmp_path, tok_dir, vocab_size):
    hp = {"n_layer": 1, "n_embd": 32, "n_head": 2, "n_head_kv": 2, "head_dim": 16, "n_ff": 64, "n_vocab": vocab_size}
    cfg = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2,
           "intermediate_size": 64, "vocab_size": vocab_size, "bos_token_id": 151643}
    d = write_checkpoint(tmp_path / "tok", cfg, hf_tensors("llama", hp, False), "F16")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tok_dir / f, d / f)
    return d


def test_tokenizer_facts_llama3_match_llama_cpp_vocab(deskside_bin, shared, tmp_path):
    # gguf-py parses every token of the vocabulary; this one file takes it several seconds.
    vocab = GGUFReader(shared / "models" / "vocab" / "ggml-vocab-llama-bpe.gguf").fields
    j = inspect(deskside_bin, tokenizer_checkpoint(tmp_path, shared / "models" / "hf-tokenizers" / "llama3", 128256))
    t = j["tokenizer"]
    assert t["kind"] == vocab["tokenizer.ggml.model"].contents()
    assert t["n_vocab"] == len(vocab["tokenizer.ggml.tokens"].data)
    assert t["bos"] == vocab["tokenizer.ggml.bos_token_id"].contents()
    assert t["eos"] == vocab["tokenizer.ggml.eos_token_id"].contents()
    assert j["chat_template"] is True


def test_tokenizer_facts_qwen3(deskside_bin, shared, tmp_path):
    tok_dir = shared / "models" / "hf-tokenizers" / "qwen3"
    tj = json.loads((tok_dir / "tokenizer.json").read_text())
    tc = json.loads((tok_dir / "tokenizer_config.json").read_text())
    ids = dict(tj["model"]["vocab"], **{a["content"]: a["id"] for a in tj["added_tokens"]})
    j = inspect(deskside_bin, tokenizer_checkpoint(tmp_path, tok_dir, 151936))
    t = j["tokenizer"]
    assert t["kind"] == "gpt2"  # llama.cpp's name for byte-level BPE (ggml-vocab-qwen2.gguf says so too)
    assert t["n_vocab"] == 151936  # padded to the embedding rows, as llama.cpp's converter does
    assert t["eos"] == ids[tc["eos_token"]]
    assert t["pad"] == ids[tc["pad_token"]]
    assert tc["bos_token"] is None and t["bos"] == 151643  # from config.json's bos_token_id
    assert t["add_bos"] is tc["add_bos_token"]
    assert j["chat_template"] is True


# ---- errors: exit code 1, a message naming the file and the problem ------------------------

SMALL = {"n_layer": 1, "n_embd": 8, "n_head": 2, "n_head_kv": 2, "head_dim": 4, "n_ff": 16, "n_vocab": 10}
SMALL_CONFIG = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
                "intermediate_size": 16, "vocab_size": 10}


def raw_safetensors(header, data_len):
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + bytes(data_len)


def small_dir(tmp_path, weights: bytes):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(SMALL_CONFIG))
    (d / "model.safetensors").write_bytes(weights)
    return d


def test_error_truncated_header(deskside_bin, tmp_path):
    err = inspect_error(deskside_bin, small_dir(tmp_path, struct.pack("<Q", 1000) + b"{}"))
    assert "model.safetensors: header length at byte offset 0" in err and "runs past the end" in err


def test_error_bad_json(deskside_bin, tmp_path):
    text = b'{"w": {"dtype": "F32",,}}'
    err = inspect_error(deskside_bin, small_dir(tmp_path, struct.pack("<Q", len(text)) + text))
    assert "header JSON at byte offset 30: invalid JSON" in err  # the second comma: header byte 22


def test_error_offsets_outside(deskside_bin, tmp_path):
    err = inspect_error(deskside_bin, small_dir(tmp_path, raw_safetensors(
        {"model.norm.weight": {"dtype": "F32", "shape": [8], "data_offsets": [16, 48]}}, 32)))
    assert "tensor 'model.norm.weight'" in err and "data_offsets [16, 48) lie outside the data section of 32 bytes" in err


def test_error_overlapping(deskside_bin, tmp_path):
    err = inspect_error(deskside_bin, small_dir(tmp_path, raw_safetensors(
        {"a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [24, 32]}}, 32)))
    assert "tensor 'b'" in err and "overlaps tensor 'a'" in err


def test_error_wrong_byte_count(deskside_bin, tmp_path):
    err = inspect_error(deskside_bin, small_dir(tmp_path, raw_safetensors(
        {"model.norm.weight": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 32]}}, 32)))
    assert "dtype BF16 x shape [8] needs 16 bytes, but data_offsets [0, 32) hold 32" in err


def test_error_unsupported_dtype(deskside_bin, tmp_path):
    d = write_checkpoint(tmp_path / "i64", SMALL_CONFIG, hf_tensors("llama", SMALL, False), "F32")
    tensors = {n: np.zeros(s, np.float32) for n, s in hf_tensors("llama", SMALL, False)}
    tensors["model.norm.weight"] = np.zeros(8, np.int64)
    from safetensors.numpy import save_file
    save_file(tensors, str(d / "model.safetensors"))
    err = inspect_error(deskside_bin, d)
    assert "tensor 'model.norm.weight'" in err and "dtype I64 is not supported" in err


def test_error_missing_shard(deskside_bin, tmp_path):
    d = write_checkpoint(tmp_path / "sh", SMALL_CONFIG, hf_tensors("llama", SMALL, False), "F16", shards=2)
    (d / "model-00002-of-00002.safetensors").unlink()
    err = inspect_error(deskside_bin, d)
    assert "model.safetensors.index.json: field 'weight_map." in err
    assert "shard 'model-00002-of-00002.safetensors' does not exist" in err


def test_error_unsupported_architecture(deskside_bin, tmp_path):
    cfg = dict(SMALL_CONFIG, model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"])
    err = inspect_error(deskside_bin, write_checkpoint(tmp_path / "ds", cfg, hf_tensors("llama", SMALL, False), "F32"))
    assert "model_type 'deepseek_v3' (architectures: DeepseekV3ForCausalLM) is not supported" in err
    assert "qwen3_moe" in err and "phi3" in err and "gpt_oss" in err  # the list of what deskside reads


MOE_CONFIG = dict(SMALL_CONFIG, model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], num_key_value_heads=2,
                  num_experts=2, num_experts_per_tok=1, moe_intermediate_size=16, norm_topk_prob=True)


def moe_tensors(n_expert):
    out = [(n, s) for n, s in hf_tensors("llama", SMALL, False) if ".mlp." not in n]
    out += [("model.layers.0.self_attn.q_norm.weight", [4]), ("model.layers.0.self_attn.k_norm.weight", [4]),
            ("model.layers.0.mlp.gate.weight", [2, 8])]
    for e in range(n_expert):
        p = f"model.layers.0.mlp.experts.{e}."
        out += [(p + "gate_proj.weight", [16, 8]), (p + "up_proj.weight", [16, 8]), (p + "down_proj.weight", [8, 16])]
    return out


def test_qwen3moe_experts_stack(deskside_bin, tmp_path):
    j = inspect(deskside_bin, write_checkpoint(tmp_path / "moe", MOE_CONFIG, moe_tensors(2), "BF16", shards=2))
    shapes = {t["name"]: t["shape"] for t in j["tensors"]}
    assert shapes["blk.0.ffn_gate_inp.weight"] == [8, 2]
    assert shapes["blk.0.ffn_gate_exps.weight"] == [8, 16, 2] and shapes["blk.0.ffn_down_exps.weight"] == [16, 8, 2]
    assert not any("experts" in n for n in shapes)


@pytest.mark.parametrize("key, value, message", [
    ("decoder_sparse_step", 2, "field 'decoder_sparse_step'"),
    ("mlp_only_layers", [0], "field 'mlp_only_layers'"),
    ("norm_topk_prob", False, "field 'norm_topk_prob'"),
    ("num_experts", 3, "has no expert 2 for blk.0.ffn_down_exps.weight"),
    ("num_experts", 1, "is expert 1, but config.json has 1 experts"),
])
def test_error_qwen3moe_config(deskside_bin, tmp_path, key, value, message):
    cfg = dict(MOE_CONFIG, **{key: value})
    err = inspect_error(deskside_bin, write_checkpoint(tmp_path / "moe", cfg, moe_tensors(2), "F32"))
    assert message in err


def test_error_phi3_rope_factors(deskside_bin, tmp_path):
    cfg = dict(SMALL_CONFIG, model_type="phi3", max_position_embeddings=8192, original_max_position_embeddings=4096,
               rope_scaling={"type": "longrope", "short_factor": [1.0] * 3, "long_factor": [2.0, 2.0]})
    tensors = [(n, s) for n, s in hf_tensors("llama", SMALL, False) if "proj" not in n]
    p = "model.layers.0."
    tensors += [(p + "self_attn.qkv_proj.weight", [24, 8]), (p + "self_attn.o_proj.weight", [8, 8]),
                (p + "mlp.gate_up_proj.weight", [32, 8]), (p + "mlp.down_proj.weight", [8, 16])]
    err = inspect_error(deskside_bin, write_checkpoint(tmp_path / "phi", cfg, tensors, "F32"))
    assert "field 'rope_scaling.short_factor': expected a list of 2 numbers (head_dim / 2)" in err
    cfg["rope_scaling"]["short_factor"] = [1.0, 1.0]
    j = inspect(deskside_bin, write_checkpoint(tmp_path / "phi-ok", cfg, tensors, "F32"))
    assert [t["name"] for t in j["tensors"]][:2] == ["rope_factors_short.weight", "rope_factors_long.weight"]
    assert j["architecture"] == "phi3"
