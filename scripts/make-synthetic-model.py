#!/usr/bin/env python3
"""Writes a synthetic Llama-architecture GGUF (F16, seeded random weights) for CPU benchmarks.

The benchmark needs a model larger than the CPU's last-level cache, so that generation is bound by
memory bandwidth as it is for real models, in a shape real models have (defaults: TinyLlama-1.1B's
widths, n_embd 2048, n_ff 5632, 32 heads, 4 KV heads, vocabulary 32000, with 16 layers: 0.83 B
parameters, 1.7 GB as F16, about 470 MB as Q4_0). The weights are random: the numbers it produces
mean nothing, only the time it takes. The tokenizer (vocabulary, scores, token types, special ids)
is copied from a real Llama 2 GGUF so that tools which tokenize (llama-bench, deskside) accept it.

usage: scripts/make-synthetic-model.py OUT.gguf [--layers 16] [--seed 1] [--tokenizer-from FILE]
                                      [--type f16|q8_0|q4_0]
Prints the output path. Quantize the F16 result with llama-quantize (scripts/bench-cpu.sh does);
--type q8_0/q4_0 quantizes every matrix with gguf-py instead, for when llama-quantize is not built
(its files differ from llama-quantize's: llama-quantize keeps output.weight at Q6_K for Q4_0).
"""
from __future__ import annotations

import argparse
import pathlib
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType
from gguf.quants import quantize

DEFAULT_TOKENIZER = str(pathlib.Path(__file__).resolve().parents[2] / "shared" / "models" / "llama-2-tiny-random.gguf")


def read_tokenizer(path: str) -> dict:
    """The tokenizer.ggml.* fields of a GGUF file, as Python values."""
    reader = GGUFReader(path)

    def field(name: str):
        f = reader.fields.get(name)
        if f is None:
            return None
        if f.types[0] == GGUFValueType.ARRAY:
            if f.types[-1] == GGUFValueType.STRING:
                return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
            return [f.parts[i][0].item() for i in f.data]
        if f.types[0] == GGUFValueType.STRING:
            return bytes(f.parts[f.data[0]]).decode("utf-8")
        return f.parts[f.data[0]][0].item()

    tok = {k: field("tokenizer.ggml." + k) for k in
           ("model", "tokens", "scores", "token_type", "bos_token_id", "eos_token_id", "unknown_token_id")}
    if tok["model"] != "llama" or not tok["tokens"]:
        raise SystemExit(f"{path}: tokenizer.ggml.model is {tok['model']!r}, expected a 'llama' (SentencePiece) vocabulary")
    return tok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--embd", type=int, default=2048)
    ap.add_argument("--ff", type=int, default=5632)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizer-from", default=DEFAULT_TOKENIZER)
    ap.add_argument("--type", choices=("f16", "q8_0", "q4_0"), default="f16")
    args = ap.parse_args()
    if args.embd % args.heads or args.heads % args.kv_heads:
        raise SystemExit("--embd must be a multiple of --heads, and --heads of --kv-heads")

    tok = read_tokenizer(args.tokenizer_from)
    n_vocab = len(tok["tokens"])
    head_dim = args.embd // args.heads
    rng = np.random.default_rng(args.seed)

    qtype = {"q8_0": GGMLQuantizationType.Q8_0, "q4_0": GGMLQuantizationType.Q4_0}.get(args.type)
    file_type = {"f16": LlamaFileType.MOSTLY_F16, "q8_0": LlamaFileType.MOSTLY_Q8_0,
                 "q4_0": LlamaFileType.MOSTLY_Q4_0}[args.type]

    def matrix(rows: int, cols: int):
        # numpy shape (rows, cols) is GGUF shape [cols, rows]: cols is the contiguous dimension.
        # std 0.02 keeps activations finite through the layers (the usual initialisation scale).
        m = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02
        if qtype is None:
            return {"tensor": m.astype(np.float16)}
        return {"tensor": quantize(m, qtype), "raw_dtype": qtype}

    w = GGUFWriter(str(args.out), "llama")
    w.add_name(f"deskside synthetic llama {args.layers}L")
    w.add_context_length(2048)
    w.add_embedding_length(args.embd)
    w.add_block_count(args.layers)
    w.add_feed_forward_length(args.ff)
    w.add_rope_dimension_count(head_dim)
    w.add_head_count(args.heads)
    w.add_head_count_kv(args.kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(n_vocab)
    w.add_file_type(file_type)
    w.add_tokenizer_model("llama")
    w.add_token_list(tok["tokens"])
    w.add_token_scores(tok["scores"])
    w.add_token_types(tok["token_type"])
    for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                     ("unknown_token_id", w.add_unk_token_id)):
        if tok[key] is not None:
            add(tok[key])

    ones = np.ones(args.embd, dtype=np.float32)
    kv_dim = args.kv_heads * head_dim
    w.add_tensor("token_embd.weight", **matrix(n_vocab, args.embd))  # [n_embd, n_vocab]
    for il in range(args.layers):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", ones)                        # [n_embd]
        w.add_tensor(p + "attn_q.weight", **matrix(args.embd, args.embd))   # [n_embd, n_embd]
        w.add_tensor(p + "attn_k.weight", **matrix(kv_dim, args.embd))      # [n_embd, kv_dim]
        w.add_tensor(p + "attn_v.weight", **matrix(kv_dim, args.embd))      # [n_embd, kv_dim]
        w.add_tensor(p + "attn_output.weight", **matrix(args.embd, args.embd))
        w.add_tensor(p + "ffn_norm.weight", ones)
        w.add_tensor(p + "ffn_gate.weight", **matrix(args.ff, args.embd))   # [n_embd, n_ff]
        w.add_tensor(p + "ffn_up.weight", **matrix(args.ff, args.embd))     # [n_embd, n_ff]
        w.add_tensor(p + "ffn_down.weight", **matrix(args.embd, args.ff))   # [n_ff, n_embd]
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", **matrix(n_vocab, args.embd))           # [n_embd, n_vocab]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
