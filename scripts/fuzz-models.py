"""Model-file fuzzing of the built deskside (scripts/fuzz-models.sh runs it with the sanitizer build).

For one GGUF per architecture and per tensor type under ../shared/models (and two vocabulary-only
files), writes broken variants: truncations, bit flips in the header and the tensor data, headers
patched at the byte level (huge counts and lengths, bad type ids, dimensions and offsets) and files
rewritten with gguf-py's GGUFWriter carrying absurd hyper-parameters or wrongly typed keys. Each
variant goes through `deskside inspect` and a 2-token `deskside generate`; a run passes when it
exits 0 or 1, prints no sanitizer report, and, when it fails, says what is wrong on stderr. Prints
the figures; exits 1 on any failing run, keeping each failing file under --keep.
"""
import argparse
import collections
import concurrent.futures
import os
import pathlib
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import gguf

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "SUMMARY: UndefinedBehavior",
                   "WARNING: ThreadSanitizer", "AddressSanitizer:DEADLYSIGNAL")
RUN_SECONDS = 60  # one deskside run; a hang past it is a failure


def dominant_type(reader):
    by_type = collections.Counter()
    for t in reader.tensors:
        by_type[t.tensor_type.name] += int(t.n_bytes)
    return by_type.most_common(1)[0][0] if by_type else "none"


def field_value(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def pick_models():
    """The smallest file of each dominant tensor type, then the smallest of each architecture not
    yet had, then the smallest holding a tensor type no chosen file holds (so every type of every
    shared file is fuzzed), then two vocabulary-only files; {path: its reader}."""
    files = sorted((p for p in (SHARED / "models").glob("*.gguf")), key=lambda p: p.stat().st_size)
    chosen, types, archs = [], set(), set()
    info, readers = [], {}
    for p in files:
        r = readers[p] = gguf.GGUFReader(p)
        info.append((p, field_value(r, "general.architecture"), dominant_type(r)))
    for p, arch, qtype in info:
        if qtype not in types:
            chosen.append(p)
            types.add(qtype)
            archs.add(arch)
    for p, arch, qtype in info:
        if arch not in archs:
            chosen.append(p)
            archs.add(arch)
    held = {t.tensor_type.name for p in chosen for t in readers[p].tensors}
    for p, _, _ in info:
        missing = {t.tensor_type.name for t in readers[p].tensors} - held
        if missing:
            chosen.append(p)
            held |= missing
    vocab = [SHARED / "models" / "vocab" / n for n in ("ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen2.gguf")]
    chosen += [v for v in vocab if v.exists()]
    return {p: readers.get(p) or gguf.GGUFReader(p) for p in chosen}


# ---- byte-level variants -----------------------------------------------------------------------

class Header:
    """Where the fields of a well-formed GGUF header are (by the spec), for patching them."""

    SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def __init__(self, data: bytes):
        self.data = data
        self.kv = []       # (key, value type, offset of the value type, offset of the value)
        self.tensors = []  # (name, offset of n_dims, offset of the type, offset of the data offset)
        pos = 8
        self.n_tensors_at, self.n_kv_at = pos, pos + 8
        n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
        pos += 16
        for _ in range(n_kv):
            key, pos = self.string(pos)
            type_at = pos
            vtype = struct.unpack_from("<I", data, pos)[0]
            pos = self.skip_value(vtype, pos + 4)
            self.kv.append((key, vtype, type_at, type_at + 4))
        for _ in range(n_tensors):
            name, pos = self.string(pos)
            dims_at = pos
            n_dims = struct.unpack_from("<I", data, pos)[0]
            pos += 4 + 8 * n_dims
            self.tensors.append((name, dims_at, pos, pos + 4))
            pos += 12
        self.end = pos

    def string(self, pos):
        n = struct.unpack_from("<Q", self.data, pos)[0]
        return self.data[pos + 8:pos + 8 + n].decode("utf-8", "replace"), pos + 8 + n

    def skip_value(self, vtype, pos):
        if vtype in self.SCALAR:
            return pos + self.SCALAR[vtype]
        if vtype == 8:
            return self.string(pos)[1]
        etype, n = struct.unpack_from("<IQ", self.data, pos)
        pos += 12
        if etype in self.SCALAR:
            return pos + n * self.SCALAR[etype]
        for _ in range(n):
            pos = self.skip_value(etype, pos)
        return pos


def patched(data: bytes, at: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def byte_variants(data: bytes, rng: random.Random, n_trunc: int, n_flip: int):
    h = Header(data)
    out = []
    cuts = {1, 4, 8, 16, 24, h.end - 1, h.end, len(data) - 1, len(data) // 2}
    cuts |= {rng.randrange(1, h.end) for _ in range(n_trunc)}
    cuts |= {rng.randrange(h.end, len(data)) for _ in range(max(1, n_trunc // 4)) if h.end < len(data)}
    for c in sorted(x for x in cuts if 0 < x < len(data)):
        out.append((f"truncated-{c}", data[:c]))
    for i in range(n_flip):
        # Mostly the header (where the reader's work is), some tensor data (what generate computes on).
        at = rng.randrange(0, h.end) if i % 4 else rng.randrange(0, len(data))
        b = bytearray(data)
        b[at] ^= 1 << rng.randrange(8)
        out.append((f"flip-{at}", bytes(b)))
    huge = [0xFFFFFFFFFFFFFFFF, 1 << 62, 1 << 32, 0x7FFFFFFF]
    for v in huge:
        out.append((f"n_tensors-{v}", patched(data, h.n_tensors_at, "<Q", v)))
        out.append((f"n_kv-{v}", patched(data, h.n_kv_at, "<Q", v)))
    for key, vtype, type_at, value_at in h.kv[:: max(1, len(h.kv) // 6)]:
        out.append((f"kv-type-{key}-99", patched(data, type_at, "<I", 99)))
        if vtype in (8, 9):  # a string's length, an array's count
            length_at = value_at + (4 if vtype == 9 else 0)
            length = struct.unpack_from("<Q", data, length_at)[0]
            out.append((f"kv-len-{key}", patched(data, length_at, "<Q", 1 << 61)))
            out.append((f"kv-len-{key}-plus1", patched(data, length_at, "<Q", length + 1)))
    for name, dims_at, type_at, offset_at in h.tensors[:: max(1, len(h.tensors) // 4)]:
        out.append((f"dims-{name}-5", patched(data, dims_at, "<I", 5)))
        out.append((f"dim0-{name}-huge", patched(data, dims_at + 4, "<Q", 1 << 62)))
        out.append((f"dim0-{name}-0", patched(data, dims_at + 4, "<Q", 0)))
        out.append((f"type-{name}-200", patched(data, type_at, "<I", 200)))
        out.append((f"type-{name}-q4_0", patched(data, type_at, "<I", 2)))
        out.append((f"offset-{name}-past-end", patched(data, offset_at, "<Q", len(data))))
        out.append((f"offset-{name}-unaligned", patched(data, offset_at, "<Q", 3)))
        out.append((f"offset-{name}-huge", patched(data, offset_at, "<Q", 0xFFFFFFFFFFFFFFF0)))
    return out


# ---- rewritten with gguf-py --------------------------------------------------------------------

def hparam_variants(reader):
    """Absurd hyper-parameters and wrongly typed keys, as {name: changes}."""
    arch = field_value(reader, "general.architecture")
    if not arch:
        return {}
    U32, U64, I32, F32, S, A = (gguf.GGUFValueType.UINT32, gguf.GGUFValueType.UINT64, gguf.GGUFValueType.INT32,
                                gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.STRING, gguf.GGUFValueType.ARRAY)
    n_head = field_value(reader, f"{arch}.attention.head_count") or 4
    n_head = n_head if isinstance(n_head, int) else max(n_head)
    k = lambda name: f"{arch}.{name}"  # noqa: E731
    out = {
        "block_count-0": {k("block_count"): (0, U32)},
        "block_count-max": {k("block_count"): (0xFFFFFFFF, U32)},
        "block_count-u64": {k("block_count"): (1 << 40, U64)},
        "block_count-negative": {k("block_count"): (-1, I32)},
        "block_count-string": {k("block_count"): ("12", S)},
        "block_count-float": {k("block_count"): (3.5, F32)},
        "n_embd-0": {k("embedding_length"): (0, U32)},
        "n_embd-huge": {k("embedding_length"): (1 << 31, U32)},
        "n_embd-off-by-one": {k("embedding_length"): ((field_value(reader, k("embedding_length")) or 64) + 1, U32)},
        "n_head-0": {k("attention.head_count"): (0, U32)},
        "n_head-huge": {k("attention.head_count"): (0xFFFFFFFF, U32)},
        "n_head_kv-0": {k("attention.head_count_kv"): (0, U32)},
        "n_head_kv-not-dividing": {k("attention.head_count_kv"): (n_head - 1 if n_head > 2 else 3, U32)},
        "n_head_kv-list-short": {k("attention.head_count_kv"): ([1], A)},
        "key_length-huge": {k("attention.key_length"): (1 << 30, U32)},
        "value_length-0": {k("attention.value_length"): (0, U32)},
        "ffn-huge": {k("feed_forward_length"): (1 << 40, U64)},
        "context-0": {k("context_length"): (0, U32)},
        "context-huge": {k("context_length"): (1 << 62, U64)},
        "experts-huge": {k("expert_count"): (1 << 31, U32), k("expert_used_count"): (1 << 30, U32)},
        "experts-used-absurd": {k("expert_used_count"): (100000, U32)},
        "rope-dims-odd": {k("rope.dimension_count"): (7, U32)},
        "rope-base-0": {k("rope.freq_base"): (0.0, F32)},
        "eps-nan": {k("attention.layer_norm_rms_epsilon"): (float("nan"), F32)},
        "sliding-window-huge": {k("attention.sliding_window"): (0xFFFFFFFF, U32)},
        "yarn-no-context": {k("rope.scaling.type"): ("yarn", S), k("rope.scaling.original_context_length"): (0, U32)},
        "bos-out-of-range": {"tokenizer.ggml.bos_token_id": (1 << 30, U32)},
        "eos-negative": {"tokenizer.ggml.eos_token_id": (-5, I32)},
        "alignment-0": {"general.alignment": (0, U32)},
        "alignment-odd": {"general.alignment": (3, U32)},
    }
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is not None:
        n = len(tokens.data)
        grown = {}
        for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            f = reader.fields.get(key)
            if f is not None:
                values = f.contents()
                extra = [f"<x{i}>" for i in range(n)] if key.endswith("tokens") else [values[-1]] * n
                grown[key] = (values + extra, A)
        out["vocab-larger-than-embedding"] = grown
    return out


def write_hparam_variants(reader, folder, keep):
    """Writes the variants `keep` picks of hparam_variants()' names."""
    out = []
    variants = hparam_variants(reader)
    for name in keep(sorted(variants)):
        changes = variants[name]
        path = folder / f"hp-{name}.gguf"
        try:
            rewrite(reader, path, changes)
            out.append(path)
        except (ValueError, OverflowError, TypeError, struct.error) as e:
            print(f"  (gguf-py cannot write {name}: {e})")
    return out


def rewrite(reader, path, changes):
    """`reader`'s file with metadata entries replaced or added ({key: (value, GGUFValueType)}); an
    array keeps the original field's element type (U32 for a new one)."""
    fixed = {}
    for key, (value, vtype) in changes.items():
        f = reader.fields.get(key)
        if vtype == gguf.GGUFValueType.ARRAY and f is not None and f.types[0] == gguf.GGUFValueType.ARRAY:
            fixed[key] = (value, vtype, f.types[-1])
        else:
            fixed[key] = (value, vtype, gguf.GGUFValueType.UINT32)
    arch = field_value(reader, "general.architecture") or "llama"
    w = gguf.GGUFWriter(path, arch)
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        if field.name in fixed:
            value, vtype, sub = fixed.pop(field.name)
        else:
            value, vtype = field.contents(), field.types[0]
            sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(field.name, value, vtype, sub_type=sub if vtype == gguf.GGUFValueType.ARRAY else None)
    for key, (value, vtype, sub) in fixed.items():
        w.add_key_value(key, value, vtype, sub_type=sub if vtype == gguf.GGUFValueType.ARRAY else None)
    for t in reader.tensors:
        w.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for t in reader.tensors:
        w.write_tensor_data(t.data)
    w.close()


# ---- running deskside --------------------------------------------------------------------------

def judge(binary, path, args):
    """(ok, what): one deskside run over a variant."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:max_allocation_size_mb=8192:"
                                        "allocator_may_return_null=0:hard_rss_limit_mb=6144",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1", DESKSIDE_MODELS=str(path.parent / "store"))
    cmd = [str(binary), *[str(path) if a == "{}" else a for a in args]]
    start = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=env, timeout=RUN_SECONDS)
    except subprocess.TimeoutExpired:
        return False, f"hung past {RUN_SECONDS} s", RUN_SECONDS
    took = time.monotonic() - start
    err = r.stderr
    if any(m in err for m in SANITIZER_MARKS):
        return False, "sanitizer report:\n" + err[-4000:], took
    if r.returncode not in (0, 1):
        return False, f"exit code {r.returncode}:\n" + err[-2000:], took
    if r.returncode == 1:
        last = err.strip().splitlines()[-1] if err.strip() else ""
        # A clean error says what is wrong: more than a bare exception name (std::bad_alloc, ...).
        if len(last) < 24 or last.rstrip().endswith(("std::bad_alloc", "vector::_M_default_append", "basic_string")):
            return False, f"exit 1 without a useful message: {last!r}", took
    return True, "ok" if r.returncode == 0 else "error", took


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=pathlib.Path, help="build directory holding deskside (a sanitizer build)")
    ap.add_argument("--quick", action="store_true", help="fewer variants per file (the scripts/test.sh run)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", type=pathlib.Path, default=pathlib.Path("fuzz-models-failures"))
    opts = ap.parse_args()
    binary = opts.build / "deskside"
    if not binary.exists():
        sys.exit(f"{binary} not built")
    rng = random.Random(opts.seed)
    n_trunc, n_flip = (3, 6) if opts.quick else (12, 24)
    generate = ["generate", "-m", "{}", "-p", "Once upon", "-n", "2", "--temp", "0", "--threads", "1"]
    runs = [("inspect", ["inspect", "{}"]), ("generate", generate)]
    work = pathlib.Path(tempfile.mkdtemp(prefix="deskside-fuzz-models-"))
    jobs = []  # (model, variant, path)
    try:
        readers = pick_models()
        models = list(readers)
        for model in models:
            data = model.read_bytes()
            folder = work / model.stem
            folder.mkdir()
            variants = byte_variants(data, rng, n_trunc, n_flip)
            if opts.quick:
                variants = rng.sample(variants, min(len(variants), 6))
            for name, blob in variants:
                p = folder / f"{name.replace('/', '_')}.gguf"
                p.write_bytes(blob)
                jobs.append((model.name, name, p))
            keep = (lambda names: rng.sample(names, min(len(names), 2))) if opts.quick else (lambda names: names)
            hp = write_hparam_variants(readers[model], folder, keep)
            jobs += [(model.name, p.stem, p) for p in hp]
        covered = sorted({t.tensor_type.name for r in readers.values() for t in r.tensors})
        archs = sorted({str(field_value(r, "general.architecture")) for r in readers.values()})
        print(f"fuzz-models: {len(models)} files ({', '.join(m.name for m in models)}), {len(jobs)} variants, "
              f"{len(jobs) * len(runs)} runs on {opts.jobs} workers")
        print(f"  tensor types: {' '.join(covered)}; architectures: {' '.join(archs)}")
        start = time.monotonic()
        counts = collections.Counter()
        failures = []
        slowest = 0.0
        with concurrent.futures.ThreadPoolExecutor(opts.jobs) as pool:
            futures = {pool.submit(judge, binary, p, args): (m, v, p, run) for m, v, p in jobs for run, args in runs}
            for fut in concurrent.futures.as_completed(futures):
                m, v, p, run = futures[fut]
                ok, what, took = fut.result()
                slowest = max(slowest, took)
                counts[(run, what if ok else "FAIL")] += 1
                if not ok:
                    failures.append((m, v, run, what))
                    opts.keep.mkdir(exist_ok=True)
                    shutil.copy(p, opts.keep / f"{pathlib.Path(m).stem}--{p.name}")
        elapsed = time.monotonic() - start
        for run, _ in runs:
            print(f"  {run:8s}: {counts[(run, 'ok')]} accepted, {counts[(run, 'error')]} clean errors, "
                  f"{counts[(run, 'FAIL')]} failures")
        print(f"  {elapsed:.0f} s, slowest run {slowest:.1f} s")
        for m, v, run, what in failures[:20]:
            print(f"FAIL {run} {m} {v}: {what}")
        if failures:
            print(f"fuzz-models: {len(failures)} failing runs; their files are in {opts.keep}/")
            return 1
        print("fuzz-models: no crash, hang, sanitizer report or unexplained error")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
