#!/usr/bin/env python3
"""Turns closeness-table rows (scripts/closeness-table.sh output, or docs/ENGINE.md's table) into the
entries of tests/engine/known_misses.h: every (file, device) whose row misses llama.cpp's bar.

usage: scripts/known-misses.py TABLE.md... > entries.inc   (then paste into known_misses.h)
Rows look like: | stem | device | max abs | mean row max | mean KL | top-1 | bar | greedy | misses |
"""
import json
import pathlib
import sys

REF = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "reference"


def rows_of(stem):
    j = json.loads((REF / f"{stem}.json").read_text())
    return sum(c["logits_rows"] for c in j["cases"])


seen = {}
for path in sys.argv[1:]:
    for line in pathlib.Path(path).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 9 or not cells[8].startswith("**"):
            continue
        stem, where, max_abs, _, kl, top1 = cells[:6]
        rows = rows_of(stem)
        disagreements = round(rows * (1 - float(top1.rstrip("%")) / 100))
        seen[(stem, where)] = (float(max_abs), float(kl), disagreements, cells[8].strip("*"))
for (stem, where), (max_abs, kl, top1, what) in sorted(seen.items()):
    print(f'    {{"{stem}", "{where}", {kl:.3g}, {top1}, {max_abs:.3g}}},  // {what}')
