#!/usr/bin/env python3
"""Writes a Llama-3-8B-shaped GGUF with random quantized weights, for GPU speed measurements.

Speed does not depend on the weight values, so the quantized blocks are written directly (random
quants with small fixed scales) instead of quantizing float weights: an 8B file takes seconds, bound
by the disk, in plain Python (no numpy, no gguf package). The tensor types follow llama-quantize's
mixes for the named file type:
  q4_0    every matrix Q4_0, output.weight Q6_K
  q8_0    every matrix Q8_0
  q4_k_m  Q4_K, with Q6_K for output.weight and for attn_v / ffn_down in llama-quantize's
          "more bits" layers (the first and last eighth, and every third layer between)
Shape (defaults, Llama 3 8B): 32 layers, n_embd 4096, n_ff 14336, 32 heads, 8 KV heads, vocabulary
128256, RoPE base 500000. The vocabulary is a synthetic SentencePiece one (<unk> <s> </s>, the 256
byte tokens, then "▁tN"), enough for tools that tokenize; its text means nothing, nor do the outputs.

usage: scripts/make-llama8b-shaped.py OUT.gguf --type q4_0|q8_0|q4_k_m [--tiny]
           [--layers N] [--embd N] [--ff N] [--heads N] [--kv-heads N] [--vocab N] [--seed S]
--tiny is a 2-layer, n_embd 256 model of the same structure (a few MB), for testing the tools.
Prints one JSON line: path, type, file_bytes, weight_bytes, bytes_per_token (the bytes a decode step
reads: every tensor but token_embd, plus one row of it).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys

ALIGN = 32  # GGUF's default general.alignment

# GGML type ids, elements per block, bytes per block.
F32, Q4_0, Q8_0, Q4_K, Q6_K = 0, 2, 8, 12, 14
BLOCK = {F32: (1, 4), Q4_0: (32, 18), Q8_0: (32, 34), Q4_K: (256, 144), Q6_K: (256, 210)}
FILE_TYPE = {"q4_0": 2, "q8_0": 7, "q4_k_m": 15}  # llama_ftype: MOSTLY_Q4_0, MOSTLY_Q8_0, MOSTLY_Q4_K_M

# GGUF metadata value types.
T_UINT32, T_INT32, T_FLOAT32, T_STRING, T_ARRAY = 4, 5, 6, 8, 9


def f16(x: float) -> bytes:
    return struct.pack("<e", x)


def block_template(qtype: int, rng: random.Random, n_blocks: int) -> bytes:
    """n_blocks random blocks of qtype with fixed small scales (weights of roughly 0.01-0.05 in size)."""
    out = bytearray()
    for _ in range(n_blocks):
        if qtype == Q4_0:  # d, 16 bytes of 4-bit quants: w = d * (q - 8)
            out += f16(0.004) + rng.randbytes(16)
        elif qtype == Q8_0:  # d, 32 int8 quants: w = d * q
            out += f16(0.0003) + rng.randbytes(32)
        elif qtype == Q4_K:  # d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of 4-bit quants
            out += f16(1e-4) + f16(1e-4) + rng.randbytes(12 + 128)
        elif qtype == Q6_K:  # 128 bytes low 4 bits, 64 bytes high 2 bits, 16 int8 scales, d
            out += rng.randbytes(128 + 64 + 16) + f16(2e-5)
        else:
            raise ValueError(qtype)
    return bytes(out)


def more_bits(layer: int, n_layer: int) -> bool:
    # llama-quantize's rule for which layers' attn_v / ffn_down get Q6_K in Q4_K_M.
    return layer < n_layer // 8 or layer >= 7 * n_layer // 8 or (layer - n_layer // 8) % 3 == 2


def tensor_plan(args) -> list[tuple[str, list[int], int]]:
    """(name, ne, type) per tensor; ne[0] is the contiguous (input) dimension."""
    ftype = args.type
    mat = {"q4_0": Q4_0, "q8_0": Q8_0, "q4_k_m": Q4_K}[ftype]
    out_type = Q8_0 if ftype == "q8_0" else Q6_K
    head_dim = args.embd // args.heads
    kv_dim = args.kv_heads * head_dim
    plan = [("token_embd.weight", [args.embd, args.vocab], mat)]  # [n_embd, n_vocab]
    for il in range(args.layers):
        p = f"blk.{il}."
        hi = Q6_K if ftype == "q4_k_m" and more_bits(il, args.layers) else mat
        plan += [
            (p + "attn_norm.weight", [args.embd], F32),
            (p + "attn_q.weight", [args.embd, args.embd], mat),       # [n_embd, n_embd]
            (p + "attn_k.weight", [args.embd, kv_dim], mat),          # [n_embd, kv_dim]
            (p + "attn_v.weight", [args.embd, kv_dim], hi),           # [n_embd, kv_dim]
            (p + "attn_output.weight", [args.embd, args.embd], mat),  # [n_embd, n_embd]
            (p + "ffn_norm.weight", [args.embd], F32),
            (p + "ffn_gate.weight", [args.embd, args.ff], mat),       # [n_embd, n_ff]
            (p + "ffn_up.weight", [args.embd, args.ff], mat),         # [n_embd, n_ff]
            (p + "ffn_down.weight", [args.ff, args.embd], hi),        # [n_ff, n_embd]
        ]
    plan += [("output_norm.weight", [args.embd], F32), ("output.weight", [args.embd, args.vocab], out_type)]
    return plan


def nbytes(ne: list[int], qtype: int) -> int:
    per, size = BLOCK[qtype]
    if ne[0] % per:
        raise SystemExit(f"a row of {ne[0]} elements is not a whole number of {per}-element blocks")
    n = 1
    for d in ne:
        n *= d
    return n // per * size


class Writer:
    """The GGUF v3 container: header, metadata, tensor table, aligned data."""

    def __init__(self):
        self.kv = bytearray()
        self.n_kv = 0

    @staticmethod
    def string(s: str) -> bytes:
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def add(self, key: str, vtype: int, value) -> None:
        self.n_kv += 1
        self.kv += self.string(key) + struct.pack("<I", vtype)
        if vtype == T_STRING:
            self.kv += self.string(value)
        elif vtype == T_UINT32:
            self.kv += struct.pack("<I", value)
        elif vtype == T_FLOAT32:
            self.kv += struct.pack("<f", value)
        else:
            raise ValueError(vtype)

    def add_array(self, key: str, etype: int, values: list) -> None:
        self.n_kv += 1
        self.kv += self.string(key) + struct.pack("<IIQ", T_ARRAY, etype, len(values))
        if etype == T_STRING:
            self.kv += b"".join(self.string(v) for v in values)
        else:
            self.kv += struct.pack("<%d%s" % (len(values), {T_INT32: "i", T_FLOAT32: "f"}[etype]), *values)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--type", choices=sorted(FILE_TYPE), required=True)
    ap.add_argument("--tiny", action="store_true", help="2 layers, n_embd 256, n_ff 512, 4 heads, vocab 512")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--embd", type=int)
    ap.add_argument("--ff", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    shape = dict(layers=2, embd=256, ff=512, heads=4, kv_heads=2, vocab=512) if args.tiny else \
        dict(layers=32, embd=4096, ff=14336, heads=32, kv_heads=8, vocab=128256)
    for k, v in shape.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.embd % args.heads or args.heads % args.kv_heads or args.vocab < 260:
        raise SystemExit("--embd must be a multiple of --heads, --heads of --kv-heads, and --vocab at least 260")

    rng = random.Random(args.seed)
    w = Writer()
    w.add("general.architecture", T_STRING, "llama")
    w.add("general.name", T_STRING, f"deskside llama-3-8b-shaped {args.type} {args.layers}L (random weights)")
    w.add("general.file_type", T_UINT32, FILE_TYPE[args.type])
    w.add("llama.context_length", T_UINT32, 8192)
    w.add("llama.embedding_length", T_UINT32, args.embd)
    w.add("llama.block_count", T_UINT32, args.layers)
    w.add("llama.feed_forward_length", T_UINT32, args.ff)
    w.add("llama.rope.dimension_count", T_UINT32, args.embd // args.heads)
    w.add("llama.attention.head_count", T_UINT32, args.heads)
    w.add("llama.attention.head_count_kv", T_UINT32, args.kv_heads)
    w.add("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-5)
    w.add("llama.rope.freq_base", T_FLOAT32, 500000.0)
    w.add("llama.vocab_size", T_UINT32, args.vocab)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581t{i}" for i in range(args.vocab - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (args.vocab - 259)  # unknown, control, byte, normal
    w.add("tokenizer.ggml.model", T_STRING, "llama")
    w.add_array("tokenizer.ggml.tokens", T_STRING, tokens)
    w.add_array("tokenizer.ggml.scores", T_FLOAT32, [0.0] * 259 + [-float(i) for i in range(args.vocab - 259)])
    w.add_array("tokenizer.ggml.token_type", T_INT32, types)
    w.add("tokenizer.ggml.unknown_token_id", T_UINT32, 0)
    w.add("tokenizer.ggml.bos_token_id", T_UINT32, 1)
    w.add("tokenizer.ggml.eos_token_id", T_UINT32, 2)

    plan = tensor_plan(args)
    table = bytearray()
    offset = 0
    placed = []
    for name, ne, qtype in plan:
        size = nbytes(ne, qtype)
        table += w.string(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        table += struct.pack("<IQ", qtype, offset)
        placed.append((name, ne, qtype, size))
        offset += (size + ALIGN - 1) // ALIGN * ALIGN

    # One template of random blocks per type (about 1 MiB), repeated through each tensor.
    templates = {q: block_template(q, rng, (1 << 20) // BLOCK[q][1]) for q in (Q4_0, Q8_0, Q4_K, Q6_K)}
    ones = struct.pack("<f", 1.0) * args.embd

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(plan), w.n_kv) + w.kv + table)
        f.write(b"\0" * (-f.tell() % ALIGN))
        for name, ne, qtype, size in placed:
            if qtype == F32:
                f.write(ones)
            else:
                t = templates[qtype]
                for _ in range(size // len(t)):
                    f.write(t)
                f.write(t[: size % len(t)])  # templates hold whole blocks, and so does the remainder
            f.write(b"\0" * (-size % ALIGN))
        file_bytes = f.tell()

    weight_bytes = sum(p[3] for p in placed)
    embd = next(p for p in placed if p[0] == "token_embd.weight")
    per_token = weight_bytes - embd[3] + embd[3] // args.vocab
    print(json.dumps({"path": args.out, "type": args.type, "layers": args.layers, "file_bytes": file_bytes,
                      "weight_bytes": weight_bytes, "bytes_per_token": per_token}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
