"""`deskside quantize` against llama-quantize: for every type, on stories260K (64-wide rows, so the
K-quants fall back to 32-block types) and synth-k (every K-quant applies), our file equals
llama-quantize's byte for byte — metadata, tensor order, each tensor's type, shape and bytes. The
reference files are the ones in ../shared/models made by llama-quantize where they exist, else the
peer's llama-quantize run here. The files load in gguf-py and in the peer's llama-completion, which
produces the same greedy tokens as `deskside generate` on them.
"""
import json
import os
import subprocess

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType

TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L",
         "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"]
# llama.cpp's llama_ftype for each.
FILE_TYPES = {"F32": 0, "F16": 1, "BF16": 32, "Q8_0": 7, "Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10,
              "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17,
              "Q6_K": 18, "IQ4_NL": 25, "IQ4_XS": 30}
MODELS = ["stories260K", "synth-k"]


def quantize(deskside_bin, *args, check=True):
    r = subprocess.run([str(deskside_bin), "quantize", *map(str, args)], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def peer_quantize(peer_bin, src, dst, qtype, *flags):
    # As the shared files were made: two threads, given last.
    r = subprocess.run([str(peer_bin / "llama-quantize"), *flags, str(src), str(dst), qtype, "2"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def reference(shared, request, tmp_path, model, qtype):
    stored = shared / "models" / f"{model}-{qtype.lower()}.gguf"
    if stored.exists():
        return stored
    out = tmp_path / f"peer-{model}-{qtype}.gguf"
    peer_quantize(request.getfixturevalue("peer_bin"), shared / "models" / f"{model}.gguf", out, qtype)
    return out


def tensor_differences(ours, theirs):
    a, b = GGUFReader(ours), GGUFReader(theirs)
    diffs = []
    if [t.name for t in a.tensors] != [t.name for t in b.tensors]:
        diffs.append(f"tensor order: {[t.name for t in a.tensors]} vs {[t.name for t in b.tensors]}")
    theirs_by_name = {t.name: t for t in b.tensors}
    for t in a.tensors:
        u = theirs_by_name.get(t.name)
        if u is None:
            diffs.append(f"{t.name}: not in llama-quantize's file")
        elif t.tensor_type != u.tensor_type or list(t.shape) != list(u.shape):
            diffs.append(f"{t.name}: {t.tensor_type.name} {list(t.shape)} vs {u.tensor_type.name} {list(u.shape)}")
        elif t.data.tobytes() != u.data.tobytes():
            diffs.append(f"{t.name} ({t.tensor_type.name}): bytes differ")
    keys_a = [k for k in a.fields if not k.startswith("GGUF.")]
    keys_b = [k for k in b.fields if not k.startswith("GGUF.")]
    if keys_a != keys_b:
        diffs.append(f"metadata keys: {keys_a} vs {keys_b}")
    return diffs


def assert_same_file(ours, theirs):
    diffs = tensor_differences(ours, theirs)
    assert not diffs, "\n".join(diffs[:20])
    # Same tensors and keys; the whole file then agrees too (values, alignment, padding).
    assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("model", MODELS)
def test_equals_llama_quantize(deskside_bin, shared, request, tmp_path, model, qtype):
    ours = tmp_path / f"{model}-{qtype}.gguf"
    quantize(deskside_bin, shared / "models" / f"{model}.gguf", ours, "--type", qtype, "--threads", 2)
    assert_same_file(ours, reference(shared, request, tmp_path, model, qtype))


@pytest.mark.parametrize("qtype", ["Q4_K_M", "Q4_0", "IQ4_XS"])
def test_imatrix_equals_llama_quantize(deskside_bin, shared, peer_bin, tmp_path, qtype):
    src, imatrix = shared / "models" / "synth-k.gguf", shared / "models" / "synth-k.imatrix"
    theirs, ours = tmp_path / "theirs.gguf", tmp_path / "ours.gguf"
    peer_quantize(peer_bin, src, theirs, qtype, "--imatrix", str(imatrix))
    quantize(deskside_bin, src, ours, "--type", qtype, "--imatrix", imatrix)
    assert_same_file(ours, theirs)


def test_metadata_as_llama_quantize_writes_it(deskside_bin, shared, tmp_path):
    src = shared / "models" / "synth-k.gguf"
    out = tmp_path / "q.gguf"
    quantize(deskside_bin, src, out, "--type", "q4_k_m")  # names are case-insensitive, as llama-quantize's
    r, original = GGUFReader(out), GGUFReader(src)
    keys = [k for k in r.fields if not k.startswith("GGUF.")]
    assert keys[-2:] == ["general.quantization_version", "general.file_type"]
    # gguf_set_val moves a key the input already has (synth-k has general.file_type) to the end.
    moved = {"general.quantization_version", "general.file_type"}
    assert keys[:-2] == [k for k in original.fields if not k.startswith("GGUF.") and k not in moved]
    assert r.fields["general.file_type"].contents() == FILE_TYPES["Q4_K_M"]
    assert r.fields["general.quantization_version"].contents() == 2
    kinds = {t.name: t.tensor_type for t in r.tensors}
    assert kinds["output.weight"] == GGMLQuantizationType.Q6_K
    assert kinds["blk.0.attn_norm.weight"] == GGMLQuantizationType.F32


def test_requantize_equals_llama_quantize(deskside_bin, shared, peer_bin, tmp_path):
    src = shared / "models" / "synth-k-q8_0.gguf"
    theirs, ours = tmp_path / "theirs.gguf", tmp_path / "ours.gguf"
    peer_quantize(peer_bin, src, theirs, "Q4_0", "--allow-requantize")
    quantize(deskside_bin, src, ours, "--type", "Q4_0", "--allow-requantize")
    assert_same_file(ours, theirs)


END_OF_TEXT = "[end of text]"


def completion_texts(peer_bin, model, prompt, n):
    """llama-completion's greedy text for n + 16 tokens, decoded as deskside prints (U+FFFD for bytes
    that are not UTF-8), the longest of the runs so far, once per run (at most eight runs). Its tokens
    go through llama.cpp's logger, a singleton that common/log.cpp leaks on purpose, with a worker
    thread printing behind the program: whatever is still queued when the program exits is lost
    (seen: the last token, or everything after "generate:"). Hence the 16 extra tokens, the reruns,
    and OMP_WAIT_POLICY=passive, so that OpenMP's spinning workers do not starve the logger on 2 cores."""
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    best = ""
    for _ in range(8):
        r = subprocess.run([str(peer_bin / "llama-completion"), "-m", str(model), "-p", prompt, "-n", str(n + 16),
                            "--temp", "0", "-no-cnv", "--no-warmup", "-t", "2", "-c", "256", "--no-display-prompt"],
                           capture_output=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr[-3000:]
        text = r.stdout.decode("utf-8", "replace").strip()
        if len(text) > len(best):
            best = text
        yield best


def assert_generates_as_llama(deskside_bin, peer_bin, model, prompt="Once upon a time", n=16):
    """`deskside generate` gives llama-completion's greedy text on `model`: its n tokens are the start of
    llama-completion's n + 16, and where deskside stopped early at the end of text, so did llama."""
    def generate(*extra):
        r = subprocess.run([str(deskside_bin), "generate", "-m", str(model), "-p", prompt, "-n", str(n), "--temp", "0",
                            "-t", "2", *extra], capture_output=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout.decode("utf-8")

    stopped = json.loads(generate("--json").strip().splitlines()[-1])["finish_reason"] == "stop"
    # deskside prints a byte that cannot start or continue UTF-8 as U+FFFD, as Python's "replace" does;
    # a character cut by the n-th token is U+FFFD here and whole in llama's longer text.
    ours = generate().strip().rstrip("\ufffd")
    assert ours, "deskside generated no text"
    theirs = ""
    for theirs in completion_texts(peer_bin, model, prompt, n):
        if (END_OF_TEXT in theirs) if stopped else (END_OF_TEXT in theirs or len(theirs) >= len(ours)):
            break
    if stopped:
        theirs_text = theirs.split(END_OF_TEXT)[0].strip()
        assert END_OF_TEXT in theirs and theirs_text == ours, \
            f"deskside stopped at the end of text: {ours!r}\nllama-completion: {theirs!r}"
    else:
        assert theirs.startswith(ours), f"deskside: {ours!r}\nllama-completion: {theirs!r}"


@pytest.mark.parametrize("model,qtype", [("stories260K", "Q4_0"), ("stories260K", "Q8_0"), ("synth-k", "Q4_K_M")])
def test_llama_completion_generates_as_deskside(deskside_bin, shared, peer_bin, tmp_path, model, qtype):
    out = tmp_path / "q.gguf"
    quantize(deskside_bin, shared / "models" / f"{model}.gguf", out, "--type", qtype)
    assert_generates_as_llama(deskside_bin, peer_bin, out)


def no_output_left(tmp_path, out):
    return not out.exists() and not any(p.name.startswith(out.name) for p in tmp_path.iterdir())


def test_unknown_type_lists_the_valid_ones(deskside_bin, shared, tmp_path):
    out = tmp_path / "q.gguf"
    r = quantize(deskside_bin, shared / "models" / "stories260K.gguf", out, "--type", "Q4_K_X", check=False)
    assert r.returncode == 2
    assert "unknown --type 'Q4_K_X'" in r.stderr and "Q4_K_M" in r.stderr and "IQ4_XS" in r.stderr
    assert no_output_left(tmp_path, out)


def test_quantized_input_needs_allow_requantize(deskside_bin, shared, tmp_path):
    out = tmp_path / "q.gguf"
    r = quantize(deskside_bin, shared / "models" / "synth-k-q8_0.gguf", out, "--type", "Q4_0", check=False)
    assert r.returncode == 1
    assert "is already quantized (q8_0)" in r.stderr and "--allow-requantize" in r.stderr
    assert "tensor blk." in r.stderr or "tensor token_embd" in r.stderr or "tensor output" in r.stderr
    assert no_output_left(tmp_path, out)


def test_missing_input_and_output_over_input(deskside_bin, shared, tmp_path):
    out = tmp_path / "q.gguf"
    r = quantize(deskside_bin, tmp_path / "absent.gguf", out, "--type", "Q8_0", check=False)
    assert r.returncode == 1 and "absent.gguf: no such file" in r.stderr
    assert no_output_left(tmp_path, out)
    src = tmp_path / "model.gguf"
    src.write_bytes((shared / "models" / "stories260K.gguf").read_bytes())
    before = src.read_bytes()
    r = quantize(deskside_bin, src, tmp_path / "." / "model.gguf", "--type", "Q8_0", check=False)
    assert r.returncode == 1 and "is the input file" in r.stderr
    assert src.read_bytes() == before


def test_directory_that_is_no_checkpoint(deskside_bin, tmp_path):
    """Checkpoint directories are quantized (tests/py/test_quantize_hf.py); one without config.json is refused."""
    (tmp_path / "ckpt").mkdir()
    out = tmp_path / "q.gguf"
    r = quantize(deskside_bin, tmp_path / "ckpt", out, "--type", "Q8_0", check=False)
    assert r.returncode == 1 and "ckpt: no config.json (not a Hugging Face checkpoint directory)" in r.stderr
    assert no_output_left(tmp_path, out)


def test_tensor_that_cannot_be_dequantized(deskside_bin, shared, tmp_path):
    """An I32 matrix where a weight is expected: llama-quantize cannot convert it either."""
    src = tmp_path / "i32.gguf"
    original = GGUFReader(shared / "models" / "stories260K.gguf")
    w = GGUFWriter(str(src), "llama")
    for name, field in original.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = field.contents()
        vtype = field.types[0]
        if vtype == 9:  # array
            w.add_array(name, value)
        else:
            w.add_key_value(name, value, vtype)
    for t in original.tensors:
        data = np.array(t.data)
        if t.name == "blk.0.attn_q.weight":
            data = np.zeros(data.shape, dtype=np.int32)
        w.add_tensor(t.name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = tmp_path / "q.gguf"
    r = quantize(deskside_bin, src, out, "--type", "Q8_0", "--allow-requantize", check=False)
    assert r.returncode == 1
    assert "tensor blk.0.attn_q.weight: type i32 cannot be dequantized" in r.stderr
    assert no_output_left(tmp_path, out)
