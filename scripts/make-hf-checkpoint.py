#!/usr/bin/env python3
"""Turns a GGUF test model into the Hugging Face checkpoint directory it would have come from.

usage: make-hf-checkpoint.py GGUF OUT_DIR [--dtype bf16|f32] [--shards N]

Writes what transformers' save_pretrained writes for that model: config.json (the model type's
keys, values from the GGUF's hyper-parameters), generation_config.json, model.safetensors (or N
shards + model.safetensors.index.json) with Hugging Face tensor names and layouts, and the
tokenizer files of a SentencePiece Llama tokenizer (tokenizer.model, tokenizer.json built with
the `tokenizers` package, tokenizer_config.json with the chat template, special_tokens_map.json).

llama.cpp's convert_hf_to_gguf.py changes weights on the way to GGUF; this undoes it:
  - llama: Q and K rows were permuted so that RoPE rotates adjacent pairs (LlamaModel.permute);
    the inverse permutation restores the halves HF rotates.
  - gemma3: norm weights were stored as 1 + w (Gemma3RMSNorm computes x * (1 + w)); w = stored - 1.
  - qwen3moe: each layer's experts were stacked (ffn_{gate,up,down}_exps, numpy [n_expert, out, in]);
    they become one tensor per expert and projection (mlp.experts.E.{gate,up,down}_proj).
  - phi3: LongRoPE's rope_factors_short/long tensors came from config.json; they go back into its
    rope_scaling (short_factor, long_factor). The fused qkv_proj and gate_up_proj stay fused.
  - gpt-oss: the experts' gate and up (and their biases) were split from gate_up_proj's even and odd
    rows; they are interleaved again. MXFP4 experts go back to OpenAI's layout (U8 _blocks
    [n_expert, out, in / 32, 16], byte i holding values 2i and 2i + 1; _scales [n_expert, out, in / 32])
    from GGUF's blocks (scale byte, then byte j holding values j and j + 16). self_attn.sinks has no
    ".weight". Experts must be MXFP4 (the form OpenAI ships); they stay so under --dtype.
Shapes need no change: a GGUF tensor's row-major numpy view is [out, in], the HF layout. Quantized
GGUFs are dequantized first (gguf-py's gguf.quants.dequantize).

Architectures: llama, qwen2, qwen3, qwen3moe, phi3, gemma3, gpt-oss (the transformers families deskside
reads). Vocabularies: SentencePiece ("llama") GGUF tokenizers, as every shared synthetic model has.
"""
import argparse
import json
import pathlib
import struct
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType
from gguf.quants import dequantize
from safetensors import TensorSpec, serialize_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, processors

TRANSFORMERS_VERSION = "4.51.3"  # the version save_pretrained stamps into the files

# GGUF architecture -> (model_type, architectures[0])
HF_TYPES = {
    "llama": ("llama", "LlamaForCausalLM"),
    "qwen2": ("qwen2", "Qwen2ForCausalLM"),
    "qwen3": ("qwen3", "Qwen3ForCausalLM"),
    "qwen3moe": ("qwen3_moe", "Qwen3MoeForCausalLM"),
    "phi3": ("phi3", "Phi3ForCausalLM"),
    "gemma3": ("gemma3_text", "Gemma3ForCausalLM"),
    "gpt-oss": ("gpt_oss", "GptOssForCausalLM"),
}

# GGUF block tensor -> HF module below model.layers.N.
BLOCK_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GEMMA3_BLOCK_NAMES = {
    **BLOCK_NAMES,
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
LLAMA_BLOCK_NAMES = {**BLOCK_NAMES, "ffn_norm": "post_attention_layernorm"}
PHI3_BLOCK_NAMES = {**LLAMA_BLOCK_NAMES, "attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"}
# qwen3moe: the router, and the stacked experts split into one module per expert (mlp.experts.E.*)
MOE_BLOCK_NAMES = {**LLAMA_BLOCK_NAMES, "ffn_gate_inp": "mlp.gate"}
EXPERT_NAMES = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
# gpt-oss: sinks (a bare parameter), the router, post_attention_layernorm as the FFN norm; experts below
GPTOSS_BLOCK_NAMES = {**BLOCK_NAMES, "post_attention_norm": "post_attention_layernorm", "attn_sinks": "self_attn.sinks",
                      "ffn_gate_inp": "mlp.router"}
GPTOSS_EXPERTS = {"ffn_gate_exps": ("gate_up_proj", 0), "ffn_up_exps": ("gate_up_proj", 1),
                  "ffn_down_exps": ("down_proj", None)}
# phi3: tensors the converter makes from config.json's rope_scaling
ROPE_FACTORS = {"rope_factors_short.weight": "short_factor", "rope_factors_long.weight": "long_factor"}
GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def fail(msg):
    sys.exit(f"make-hf-checkpoint: {msg}")


class Gguf:
    def __init__(self, path):
        self.path = path
        self.reader = GGUFReader(path)
        self.arch = self.str("general.architecture")

    def field(self, key):
        return self.reader.fields.get(key)

    def str(self, key, default=None):
        f = self.field(key)
        return default if f is None else bytes(f.parts[-1]).decode("utf-8")

    def num(self, key, default=None):
        f = self.field(key)
        return default if f is None else f.parts[-1][0].item()

    def hp(self, key, default=None):
        return self.num(f"{self.arch}.{key}", default)

    def hp_float(self, key, default=None):
        """An F32 value as the decimal a config.json states it (1e-06, not 9.99999997e-07)."""
        v = self.hp(key)
        return default if v is None else float(str(np.float32(v)))

    def array(self, key):
        f = self.field(key)
        if f is None:
            return None
        if f.types[1] == GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]


def hf_config(g, tensors, rope_factors):
    model_type, hf_class = HF_TYPES[g.arch]
    n_embd, n_head = g.hp("embedding_length"), g.hp("attention.head_count")
    n_head_kv = g.hp("attention.head_count_kv", n_head)
    head_dim = g.hp("attention.key_length", n_embd // n_head)
    cfg = {
        "architectures": [hf_class],
        "attention_dropout": 0.0,
        "bos_token_id": g.num("tokenizer.ggml.bos_token_id"),
        "eos_token_id": g.num("tokenizer.ggml.eos_token_id"),
        "hidden_size": n_embd,
        "initializer_range": 0.02,
        "intermediate_size": g.hp("feed_forward_length"),
        "max_position_embeddings": g.hp("context_length"),
        "model_type": model_type,
        "num_attention_heads": n_head,
        "num_hidden_layers": g.hp("block_count"),
        "num_key_value_heads": n_head_kv,
        "rms_norm_eps": g.hp_float("attention.layer_norm_rms_epsilon"),
        "rope_scaling": None,
        "rope_theta": g.hp_float("rope.freq_base", 10000.0),
        "tie_word_embeddings": "output.weight" not in tensors,
        "use_cache": True,
        "vocab_size": len(g.array("tokenizer.ggml.tokens")),
    }
    # Each config class's own fields (transformers configuration_<model>.py); Qwen2Config and
    # Phi3Config have no head_dim.
    if g.arch not in ("qwen2", "phi3"):
        cfg["head_dim"] = head_dim
    if g.arch in ("llama", "qwen3", "qwen3moe", "gemma3", "phi3", "gpt-oss"):
        cfg["attention_bias"] = "blk.0.attn_q.bias" in tensors
    if g.arch != "gemma3":
        cfg["hidden_act"] = "silu"
    if g.arch == "llama":
        cfg.update(mlp_bias=False, pretraining_tp=1)
    if g.arch in ("qwen2", "qwen3", "qwen3moe"):
        cfg.update(max_window_layers=cfg["num_hidden_layers"], sliding_window=None, use_sliding_window=False)
    if g.arch == "qwen3moe":
        cfg.update(decoder_sparse_step=1, mlp_only_layers=[], moe_intermediate_size=g.hp("expert_feed_forward_length"),
                   norm_topk_prob=True, num_experts=g.hp("expert_count"), num_experts_per_tok=g.hp("expert_used_count"),
                   output_router_logits=False, router_aux_loss_coef=0.001)
    if g.arch == "gpt-oss":
        window = g.hp("attention.sliding_window")
        cfg.update(intermediate_size=g.hp("expert_feed_forward_length"), num_local_experts=g.hp("expert_count"),
                   num_experts_per_tok=g.hp("expert_used_count"), output_router_logits=False,
                   router_aux_loss_coef=0.001, sliding_window=window, swiglu_limit=7.0,
                   layer_types=["sliding_attention" if window and i % 2 == 0 else "full_attention"
                                for i in range(cfg["num_hidden_layers"])])
        if g.str("gpt-oss.rope.scaling.type") == "yarn":
            # beta_fast / beta_slow left out: the converter would write them, the GGUF has llama.cpp's defaults
            cfg["rope_scaling"] = {"factor": g.hp_float("rope.scaling.factor"), "rope_type": "yarn",
                                   "original_max_position_embeddings": g.hp("rope.scaling.original_context_length")}
    if g.arch == "phi3":
        cfg.update(embd_pdrop=0.0, original_max_position_embeddings=g.hp("rope.scaling.original_context_length"),
                   pad_token_id=None, partial_rotary_factor=1.0, resid_pdrop=0.0,
                   sliding_window=g.hp("attention.sliding_window") or None)
        if rope_factors:
            cfg["rope_scaling"] = {"long_factor": rope_factors["long_factor"],
                                   "short_factor": rope_factors["short_factor"], "type": "longrope"}
    if g.arch == "gemma3":
        pattern = g.hp("attention.sliding_window_pattern", 6)
        cfg.update(
            attn_logit_softcapping=None,
            final_logit_softcapping=None,
            hidden_activation="gelu_pytorch_tanh",
            query_pre_attn_scalar=head_dim,
            rope_local_base_freq=g.hp_float("rope.freq_base_swa", 10000.0),
            sliding_window=g.hp("attention.sliding_window"),
            sliding_window_pattern=pattern,
            layer_types=[
                "full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(cfg["num_hidden_layers"])
            ],
        )
    cfg["torch_dtype"] = None  # set by the caller
    cfg["transformers_version"] = TRANSFORMERS_VERSION
    return dict(sorted(cfg.items()))


def unpermute(w, n_head):
    """Inverse of convert_hf_to_gguf's LlamaModel.permute (rows of Q or K, per head)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensor_values(t):
    """A GGUF tensor as F32, row-major [out, in] (dequantized where it is quantized)."""
    if t.tensor_type.name in ("F32", "F16", "BF16"):
        return np.array(t.data, dtype=np.float32)
    try:
        w = dequantize(t.data, t.tensor_type)
    except NotImplementedError:
        fail(f"tensor {t.name}: gguf-py cannot dequantize {t.tensor_type.name}")
    return np.asarray(w, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])


def openai_mxfp4(t):
    """A GGUF MXFP4 expert stack -> OpenAI's (blocks [E, rows, nb, 16], scales [E, rows, nb]), U8."""
    if t.tensor_type.name != "MXFP4":
        fail(f"tensor {t.name}: gpt-oss experts must be MXFP4 (found {t.tensor_type.name})")
    n_expert, rows, n_in = (int(d) for d in reversed(t.shape))
    raw = np.asarray(t.data, dtype=np.uint8).reshape(n_expert, rows, n_in // 32, 17)
    qs = raw[..., 1:]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # value order 0..31
    blocks = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)
    return blocks, np.ascontiguousarray(raw[..., 0])


def interleave(even, odd, axis):
    out = np.empty(even.shape[:axis] + (2 * even.shape[axis],) + even.shape[axis + 1:], dtype=even.dtype)
    index = [slice(None)] * even.ndim
    index[axis] = slice(0, None, 2)
    out[tuple(index)] = even
    index[axis] = slice(1, None, 2)
    out[tuple(index)] = odd
    return out


def gpt_oss_experts(layer, found):
    """The HF expert tensors of one gpt-oss layer from its GGUF tensors {(base, weight|bias): tensor}."""
    prefix = f"model.layers.{layer}.mlp.experts."
    out = {}
    gate, up, down = (openai_mxfp4(found[b, "weight"]) for b in ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"))
    out[prefix + "gate_up_proj_blocks"] = interleave(gate[0], up[0], 1)
    out[prefix + "gate_up_proj_scales"] = interleave(gate[1], up[1], 1)
    out[prefix + "down_proj_blocks"], out[prefix + "down_proj_scales"] = down
    bias = {b: tensor_values(found[b, "bias"]) for b in ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")}
    out[prefix + "gate_up_proj_bias"] = interleave(bias["ffn_gate_exps"], bias["ffn_up_exps"], 1)
    out[prefix + "down_proj_bias"] = bias["ffn_down_exps"]
    return out


def hf_tensors(g):
    """(HF tensors by name, phi3's LongRoPE factor lists by rope_scaling key)."""
    n_head = g.hp("attention.head_count")
    n_head_kv = g.hp("attention.head_count_kv", n_head)
    block_names = {"gemma3": GEMMA3_BLOCK_NAMES, "phi3": PHI3_BLOCK_NAMES, "qwen3moe": MOE_BLOCK_NAMES,
                   "gpt-oss": GPTOSS_BLOCK_NAMES}.get(g.arch, LLAMA_BLOCK_NAMES)
    out, rope_factors = {}, {}
    experts = {}  # gpt-oss: layer -> {(base, weight|bias): tensor}
    for t in g.reader.tensors:
        parts = t.name.split(".")
        if parts[0] == "blk" and g.arch == "gpt-oss" and parts[2] in GPTOSS_EXPERTS:
            experts.setdefault(int(parts[1]), {})[parts[2], parts[3]] = t
            continue
        w = tensor_values(t)  # row-major [out, in]: already the HF layout
        if t.name in ROPE_FACTORS and g.arch == "phi3":
            rope_factors[ROPE_FACTORS[t.name]] = [float(str(np.float32(v))) for v in w]
            continue
        if parts[0] == "blk" and g.arch == "qwen3moe" and parts[2] in EXPERT_NAMES:
            for e in range(w.shape[0]):
                name = f"model.layers.{parts[1]}.mlp.experts.{e}.{EXPERT_NAMES[parts[2]]}.{parts[-1]}"
                out[name] = np.ascontiguousarray(w[e])
            continue
        if parts[0] == "blk":
            base = ".".join(parts[2:-1])
            if base not in block_names:
                fail(f"{g.path}: no Hugging Face name for tensor {t.name} in a {g.arch} checkpoint")
            name = f"model.layers.{parts[1]}.{block_names[base]}.{parts[-1]}"
            if base == "attn_sinks":
                name = name.removesuffix(".weight")
            if g.arch == "llama" and base == "attn_q":
                w = unpermute(w, n_head)
            elif g.arch == "llama" and base == "attn_k":
                w = unpermute(w, n_head_kv)
        else:
            base = ".".join(parts[:-1])
            if base not in GLOBAL_NAMES:
                fail(f"{g.path}: no Hugging Face name for tensor {t.name}")
            name = f"{GLOBAL_NAMES[base]}.{parts[-1]}"
        if g.arch == "gemma3" and t.name.endswith("norm.weight"):
            w = w - 1.0
        out[name] = np.ascontiguousarray(w)
    for layer in sorted(experts):
        out.update(gpt_oss_experts(layer, experts[layer]))
    return out, rope_factors


def to_bf16(w):
    """F32 -> BF16 bits, rounding to nearest even (as torch's .to(torch.bfloat16))."""
    bits = w.astype(np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def save_safetensors(path, tensors, dtype):
    keep = []
    specs = {}
    for name, w in tensors.items():
        name_of_dtype = "bfloat16" if dtype == "bf16" else "float32"
        if w.dtype == np.uint8:  # MXFP4 blocks and scales
            data, name_of_dtype = w, "uint8"
        else:
            data = to_bf16(w) if dtype == "bf16" else w.astype(np.float32)
        data = np.ascontiguousarray(data)
        keep.append(data)
        specs[name] = TensorSpec(dtype=name_of_dtype, shape=list(w.shape),
                                 data_ptr=data.ctypes.data, data_len=data.nbytes)
    serialize_file(specs, str(path), metadata={"format": "pt"})
    path.chmod(0o644)
    return sum(a.nbytes for a in keep)


def write_weights(out, tensors, dtype, n_shards):
    if n_shards == 1:
        save_safetensors(out / "model.safetensors", tensors, dtype)
        return
    names = list(tensors)
    if n_shards > len(names):
        fail(f"--shards {n_shards} exceeds the {len(names)} tensors")
    weight_map, total = {}, 0
    per = -(-len(names) // n_shards)
    for k in range(n_shards):
        file = f"model-{k + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k * per:(k + 1) * per]}
        total += save_safetensors(out / file, part, dtype)
        weight_map.update({n: file for n in part})
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


# ---- tokenizer -------------------------------------------------------------------------------

def protobuf_field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def varint(v):
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def sentencepiece_model(tokens, scores, types, special):
    """tokenizer.model: a sentencepiece ModelProto (sentencepiece_model.proto) of a BPE model with
    byte fallback, the kind Llama 2 ships. GGUF's token types are SentencePiece's piece types."""
    pieces = b"".join(
        protobuf_field(1, 2, protobuf_field(1, 2, t.encode()) + protobuf_field(2, 5, struct.pack("<f", s)) +
                       protobuf_field(3, 0, varint(ty)))
        for t, s, ty in zip(tokens, scores, types))
    trainer = (protobuf_field(3, 0, varint(2)) + protobuf_field(4, 0, varint(len(tokens))) +
               protobuf_field(35, 0, varint(1)) +
               protobuf_field(40, 0, varint(special["unk"])) + protobuf_field(41, 0, varint(special["bos"])) +
               protobuf_field(42, 0, varint(special["eos"])) + protobuf_field(43, 0, varint(-1)))
    normalizer = (protobuf_field(1, 2, b"identity") + protobuf_field(3, 0, varint(1)) +
                  protobuf_field(4, 0, varint(0)) + protobuf_field(5, 0, varint(1)))
    return pieces + protobuf_field(2, 2, trainer) + protobuf_field(3, 2, normalizer)


def bpe_merges(tokens, scores, types):
    """The merges transformers' SentencePieceExtractor derives from a BPE vocabulary: every split
    of a piece into two pieces, ranked by the merged piece's score (then the halves' ids)."""
    vocab = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    merges = []
    for piece, rank in vocab.items():
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                merges.append((left, right, rank))
    merges.sort(key=lambda m: (-scores[m[2]], vocab[m[0]], vocab[m[1]]))
    return [(a, b) for a, b, _ in merges]


def tokenizer_json(tokens, scores, types, special):
    vocab = {t: i for i, t in enumerate(tokens)}
    bpe = models.BPE(vocab=vocab, merges=bpe_merges(tokens, scores, types), unk_token=tokens[special["unk"]],
                     fuse_unk=True, byte_fallback=True)
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    bos = tokens[special["bos"]]
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                       special_tokens=[(bos, special["bos"])])
    tok.add_special_tokens([AddedToken(tokens[i], normalized=False, special=True)
                            for i in range(len(tokens)) if types[i] in (2, 3)])
    return tok


def added_token_entry(text):
    return {"content": text, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}


def write_tokenizer(g, out, config):
    if g.str("tokenizer.ggml.model") != "llama":
        fail(f"{g.path}: tokenizer.ggml.model '{g.str('tokenizer.ggml.model')}' is not a SentencePiece vocabulary")
    tokens, scores, types = (g.array(k) for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"))
    special = {k: g.num(f"tokenizer.ggml.{key}_token_id") for k, key in (("unk", "unknown"), ("bos", "bos"), ("eos", "eos"))}
    (out / "tokenizer.model").write_bytes(sentencepiece_model(tokens, scores, types, special))
    tokenizer_json(tokens, scores, types, special).save(str(out / "tokenizer.json"))

    specials = [i for i in range(len(tokens)) if types[i] in (2, 3)]
    tc = {
        "add_bos_token": bool(g.num("tokenizer.ggml.add_bos_token", 1)),
        "add_eos_token": bool(g.num("tokenizer.ggml.add_eos_token", 0)),
        "add_prefix_space": None,
        "added_tokens_decoder": {str(i): {**added_token_entry(tokens[i]), "special": True} for i in specials},
        "bos_token": tokens[special["bos"]],
        "clean_up_tokenization_spaces": False,
        "eos_token": tokens[special["eos"]],
        "extra_special_tokens": {},
        "legacy": False,
        "model_max_length": config["max_position_embeddings"],
        "pad_token": None,
        "sp_model_kwargs": {},
        "spaces_between_special_tokens": False,
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": tokens[special["unk"]],
        "use_default_system_prompt": False,
    }
    if (template := g.str("tokenizer.chat_template")) is not None:
        tc["chat_template"] = template
    (out / "tokenizer_config.json").write_text(json.dumps(dict(sorted(tc.items())), indent=2, ensure_ascii=False) + "\n")
    stm = {k: added_token_entry(tokens[special[k[:3]]]) for k in ("bos_token", "eos_token", "unk_token")}
    (out / "special_tokens_map.json").write_text(json.dumps(stm, indent=2) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    ap.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    ap.add_argument("--shards", type=int, default=1)
    a = ap.parse_args()
    if a.shards < 1:
        fail("--shards must be >= 1")
    g = Gguf(a.gguf)
    if g.arch not in HF_TYPES:
        fail(f"{a.gguf}: architecture '{g.arch}' has no transformers family deskside reads ({', '.join(HF_TYPES)})")
    tensors, rope_factors = hf_tensors(g)
    out = pathlib.Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = hf_config(g, {t.name for t in g.reader.tensors}, rope_factors)
    config["torch_dtype"] = "bfloat16" if a.dtype == "bf16" else "float32"
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    gen = {"_from_model_config": True, "bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}
    gen["transformers_version"] = TRANSFORMERS_VERSION
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    write_weights(out, tensors, a.dtype, a.shards)
    write_tokenizer(g, out, config)


if __name__ == "__main__":
    main()
