#!/usr/bin/env python3
"""Pairs deskside's per-op dumps (dump_deskside --dump-dir) with llama.cpp's named tensors
(dump_logits --dump-dir) of the same decode and prints, in deskside's op order, the llama.cpp
tensor of the same size closest to each output and their max abs difference: the first op with
a non-zero difference is where the two computations part.

    match_tensors.py OURS_DIR PEER_DIR

Dump the same decode on both sides (--mode ref and the same --dump-case / --dump-pos).
"""
import argparse
import glob
import os

import numpy as np


def load(path, n_dims):
    raw = np.fromfile(path, dtype="<i8", count=n_dims)
    data = np.fromfile(path, dtype="<f4", offset=8 * n_dims)
    return raw, data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("peer")
    args = ap.parse_args()
    peer = {}
    for p in glob.glob(os.path.join(args.peer, "*.f32")):
        _, d = load(p, 4)
        peer.setdefault(d.size, []).append((os.path.basename(p)[:-4], d))
    for p in sorted(glob.glob(os.path.join(args.ours, "*.f32"))):
        ne, d = load(p, 2)
        cands = peer.get(d.size, [])
        if not cands:
            print(f"{os.path.basename(p):28s} {tuple(ne)} no llama.cpp tensor of that size")
            continue
        best = min(cands, key=lambda c: float(np.abs(c[1] - d).max()))
        diff = float(np.abs(best[1] - d).max())
        print(f"{os.path.basename(p):28s} {tuple(ne)} ~ {best[0]:24s} max diff {diff:.3g}")


if __name__ == "__main__":
    main()
