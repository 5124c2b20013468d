#!/usr/bin/env python3
"""Compares two logits files laid out as ../shared/reference/<model>.logits.f32 (README there).

    compare_logits.py REF.json A.f32 B.f32 [--rows]

Prints the max |A - B| over all logits, the mean over rows of each row's maximum, the number
of rows whose maximum exceeds 1e-3 and 2e-2, the first row (case, position) that differs at
all, and with --rows every row's maximum. A or B may be "ref" for the reference's own file.
"""
import argparse
import json
import os

import numpy as np


def load(path, ref_json, n_vocab):
    if path == "ref":
        path = os.path.join(os.path.dirname(ref_json), json.load(open(ref_json))["logits_file"])
    return np.fromfile(path, dtype="<f4").reshape(-1, n_vocab)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref_json")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rows", action="store_true")
    args = ap.parse_args()
    meta = json.load(open(args.ref_json))
    n_vocab = meta["n_vocab"]
    a, b = load(args.a, args.ref_json, n_vocab), load(args.b, args.ref_json, n_vocab)
    if a.shape != b.shape:
        raise SystemExit(f"shape mismatch: {args.a} {a.shape} vs {args.b} {b.shape}")
    row_max = np.abs(a.astype(np.float64) - b).max(axis=1)
    where = []
    for ci, c in enumerate(meta["cases"]):
        where += [(ci, j) for j in range(c["logits_rows"])]
    nz = np.nonzero(row_max)[0]
    first = where[nz[0]] if len(nz) else None
    worst = where[int(row_max.argmax())]
    print(f"max {row_max.max():.6g} mean_row_max {row_max.mean():.6g} rows>1e-3 {(row_max > 1e-3).sum()}"
          f" rows>2e-2 {(row_max > 2e-2).sum()} of {len(row_max)} identical_rows {(row_max == 0).sum()}"
          f" first_diff {first} worst {worst}")
    if args.rows:
        for (ci, j), m in zip(where, row_max):
            print(f"case {ci} pos {j} {m:.6g}")


if __name__ == "__main__":
    main()
