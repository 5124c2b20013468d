"""Hugging Face checkpoints whose tokenizer is a byte-level BPE tokenizer.json only (Llama 3, Qwen
2/3): `deskside quantize HF_DIR` writes the "gpt2" vocabulary llama.cpp's converter writes, checked
against things we did not write:

  - ggml-vocab-llama-bpe.gguf and ggml-vocab-qwen2.gguf, llama.cpp's own converter outputs for
    Meta-Llama-3-8B and Qwen1.5 (tokens, types, merges, special ids, tokenizer.ggml.pre);
  - the converter's pre-tokenizer table (get_vocab_base_pre in the peer llama.cpp source, read by
    scripts/gen-bpe-pre-table.py) with the hash of the ids transformers' AutoTokenizer gives for
    its test text, which is the converter's own call;
  - transformers' tokenizer.vocab / added tokens and gguf-py's SpecialVocab(load_merges=True);
  - the peer's llama-completion on the converted file, whose greedy text is deskside's.

The checkpoints are tiny random Llama / Qwen2 models carrying the real tokenizer files of
../shared/models/hf-tokenizers. That "llama3" tokenizer.json has no BOS template (its
post-processor is ByteLevel only), so the converter names it "smaug-bpe" (Smaug-Llama-3 ships the
same file); Meta's Meta-Llama-3-8B file adds <|begin_of_text|> with a TemplateProcessing, which is
what ggml-vocab-llama-bpe.gguf came from: the "llama3-bos" case adds that template.
"""
import hashlib
import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys

import pytest
from gguf import GGUFReader, SpecialVocab
from required import skip_or_fail
from test_hf_checkpoint import hf_tensors, write_checkpoint
from test_quantize import assert_generates_as_llama

REPO = pathlib.Path(__file__).resolve().parents[2]
GEN_SCRIPT = REPO / "scripts" / "gen-bpe-pre-table.py"
QWEN2_ADDED_END = 151646  # ggml-vocab-qwen2.gguf's vocabulary: ids below this are Qwen's tokens


def load_gen_script():
    spec = importlib.util.spec_from_file_location("gen_bpe_pre_table", GEN_SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def converter_table():
    """(chktxt, hash -> name) from the peer llama.cpp source, as the converter holds them."""
    gen = load_gen_script()
    if not sorted(gen.PEER_SRC.glob("*/vendor/llama.cpp")):
        skip_or_fail(f"no peer llama.cpp source under {gen.PEER_SRC} (scripts/build-llama-cpp.sh)")
    path, func = gen.find_function(gen.find_llama_cpp())
    return gen.read_table(func, path)


def with_bos_template(tj):
    """Meta-Llama-3-8B's post-processor: ByteLevel, then a template that puts <|begin_of_text|> first."""
    bos = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}
    seq = lambda s, t: {"Sequence": {"id": s, "type_id": t}}
    tj["post_processor"] = {"type": "Sequence", "processors": [tj["post_processor"], {
        "type": "TemplateProcessing", "single": [bos, seq("A", 0)],
        "pair": [bos, seq("A", 0), {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, seq("B", 1)],
        "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]}
    return tj


# name -> (hf-tokenizers dir, transformers family, config.json vocab_size and BOS/EOS ids as the
# released models' config.json state them, change to tokenizer.json)
CASES = {
    "llama3": ("llama3", "llama", 128256, (128000, 128001), None),
    "llama3-bos": ("llama3", "llama", 128256, (128000, 128001), with_bos_template),
    "qwen3": ("qwen3", "qwen2", 151936, (151643, 151645), None),
}


def make_checkpoint(shared, d, case):
    tok_name, family, vocab_size, (bos, eos), change = CASES[case]
    src = shared / "models" / "hf-tokenizers" / tok_name
    hp = {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_head_kv": 2, "head_dim": 16, "n_ff": 128, "n_vocab": vocab_size}
    cfg = {"architectures": ["LlamaForCausalLM" if family == "llama" else "Qwen2ForCausalLM"], "model_type": family,
           "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 128, "vocab_size": vocab_size, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
           "rope_theta": 500000.0, "tie_word_embeddings": True, "bos_token_id": bos, "eos_token_id": eos}
    write_checkpoint(d, cfg, hf_tensors(family, hp, False), "F16")
    shutil.copy(src / "tokenizer_config.json", d / "tokenizer_config.json")
    if change is None:
        shutil.copy(src / "tokenizer.json", d / "tokenizer.json")
    else:
        tj = change(json.loads((src / "tokenizer.json").read_text()))
        (d / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False))
    return d


def quantize(deskside_bin, d, out, check=True):
    r = subprocess.run([str(deskside_bin), "quantize", str(d), str(out), "--type", "q8_0"], capture_output=True, text=True, timeout=600)
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.fixture(scope="module")
def converted(deskside_bin, shared, tmp_path_factory):
    """case -> (checkpoint dir, `deskside quantize DIR --type q8_0` output), made once per case."""
    out = {}
    for case in CASES:
        base = tmp_path_factory.mktemp(case)
        d = make_checkpoint(shared, base / "ckpt", case)
        quantize(deskside_bin, d, base / "q8_0.gguf")
        out[case] = d, base / "q8_0.gguf"
    return out


def tokenizer_kv(path):
    r = GGUFReader(path)
    return {k: r.fields[k].contents() for k in r.fields if k.startswith("tokenizer.")}


def transformers_hash(d, chktxt):
    """sha256 of str() of AutoTokenizer(d).encode(chktxt): get_vocab_base_pre's own computation."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        skip_or_fail("transformers is not installed (pip install -r scripts/requirements.txt)")
    return hashlib.sha256(str(AutoTokenizer.from_pretrained(d).encode(chktxt)).encode()).hexdigest()


def test_table_is_the_peer_converters():
    """models/bpe_pre_hashes.inc is what scripts/gen-bpe-pre-table.py makes of the peer source."""
    gen = load_gen_script()
    if not sorted(gen.PEER_SRC.glob("*/vendor/llama.cpp")):
        skip_or_fail(f"no peer llama.cpp source under {gen.PEER_SRC} (scripts/build-llama-cpp.sh)")
    r = subprocess.run([sys.executable, str(GEN_SCRIPT), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("case,pre", [("llama3", "smaug-bpe"), ("llama3-bos", "llama-bpe"), ("qwen3", "qwen2")])
def test_pre_tokenizer_is_named_as_the_converter_names_it(converter_table, converted, case, pre):
    chktxt, table = converter_table
    d, out = converted[case]
    h = transformers_hash(d, chktxt)
    assert table.get(h) == pre
    # the `tokenizers` package alone (no transformers) gives the same ids
    from tokenizers import Tokenizer
    assert hashlib.sha256(str(Tokenizer.from_file(str(d / "tokenizer.json")).encode(chktxt).ids).encode()).hexdigest() == h
    kv = tokenizer_kv(out)
    assert kv["tokenizer.ggml.model"] == "gpt2"
    assert kv["tokenizer.ggml.pre"] == pre


def test_llama3_vocabulary_is_llama_cpps(shared, converted):
    """Meta's Llama 3 tokenizer gives ggml-vocab-llama-bpe.gguf's vocabulary, key for key."""
    ref = tokenizer_kv(shared / "models" / "vocab" / "ggml-vocab-llama-bpe.gguf")
    ours = tokenizer_kv(converted["llama3-bos"][1])
    for key in ref:  # model, pre, tokens, token_type, merges, bos and eos ids
        assert ours[key] == ref[key], key
    assert set(ref) == {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                        "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}
    # the template adds BOS; that file predates the converter's add_*_token keys
    assert ours["tokenizer.ggml.add_bos_token"] is True and ours["tokenizer.ggml.add_eos_token"] is False


def test_qwen3_vocabulary_is_llama_cpps_qwen2_where_they_agree(shared, converted):
    """ggml-vocab-qwen2.gguf is Qwen1.5's vocabulary: the same 151643 BPE tokens and merges and the
    first three added tokens; Qwen 3 adds 23 more (<|im_start|> ... </think>) and names another EOS.
    That file's converter typed the [PAD] rows USER_DEFINED; today's writes UNUSED."""
    ref = tokenizer_kv(shared / "models" / "vocab" / "ggml-vocab-qwen2.gguf")
    ours = tokenizer_kv(converted["qwen3"][1])
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
                "tokenizer.ggml.padding_token_id"):
        assert ours[key] == ref[key], key
    tokens, types = ours["tokenizer.ggml.tokens"], ours["tokenizer.ggml.token_type"]
    assert len(tokens) == len(ref["tokenizer.ggml.tokens"]) == 151936
    assert tokens[:QWEN2_ADDED_END] == ref["tokenizer.ggml.tokens"][:QWEN2_ADDED_END]
    assert types[:QWEN2_ADDED_END] == ref["tokenizer.ggml.token_type"][:QWEN2_ADDED_END]
    tc = json.loads((converted["qwen3"][0] / "tokenizer_config.json").read_text())
    assert ours["tokenizer.ggml.eos_token_id"] == tokens.index(tc["eos_token"])
    tj = json.loads((converted["qwen3"][0] / "tokenizer.json").read_text())
    n = max(a["id"] for a in tj["added_tokens"]) + 1
    assert tokens[n:] == [f"[PAD{i}]" for i in range(n, 151936)] and set(types[n:]) == {5}


@pytest.mark.parametrize("case", ["llama3", "qwen3"])
def test_vocabulary_is_transformers_and_gguf_pys(converted, case):
    """Tokens by id from transformers' tokenizer.vocab, types from its added tokens (the converter's
    get_vocab_base), merges, special ids and add_*_token from gguf-py's SpecialVocab(load_merges=True)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        skip_or_fail("transformers is not installed (pip install -r scripts/requirements.txt)")
    d, out = converted[case]
    ours = tokenizer_kv(out)
    tok = AutoTokenizer.from_pretrained(d)
    n = json.loads((d / "config.json").read_text())["vocab_size"]
    reverse = {i: t for t, i in tok.vocab.items()}
    added, decoder = tok.get_added_vocab(), tok.added_tokens_decoder
    assert ours["tokenizer.ggml.tokens"] == [reverse.get(i, f"[PAD{i}]") for i in range(n)]
    types = ours["tokenizer.ggml.token_type"]
    for i in range(n):
        if i not in reverse:
            assert types[i] == 5, i
        elif reverse[i] in added:
            looks = reverse[i].startswith("<|") and reverse[i].endswith("|>")
            assert types[i] == (3 if decoder[i].special or looks else 4), (i, reverse[i])
        else:
            assert types[i] == 1, i
    sv = SpecialVocab(d, load_merges=True)
    assert ours["tokenizer.ggml.merges"] == sv.merges
    names = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "sep": "seperator_token_id",
             "pad": "padding_token_id", "cls": "cls_token_id", "mask": "mask_token_id"}
    assert {k: ours[f"tokenizer.ggml.{names[k]}"] for k in sv.special_token_ids} == sv.special_token_ids
    assert {k: ours[f"tokenizer.ggml.add_{k}_token"] for k in sv.add_special_token} == sv.add_special_token
    assert ours["tokenizer.chat_template"] == sv.chat_template


def changed_regex(tj):
    split = tj["pre_tokenizer"]["pretokenizers"][0]
    split["pattern"]["Regex"] = split["pattern"]["Regex"].replace("\\p{N}{1,3}", "\\p{N}{1,2}")
    return tj


def changed_merges(tj):
    tj["model"]["merges"] = tj["model"]["merges"][:1000]
    return tj


@pytest.mark.parametrize("change", [changed_regex, changed_merges])
def test_unknown_pre_tokenizer_is_refused_naming_the_hash(deskside_bin, shared, converter_table, tmp_path, change):
    """As the converter refuses it; the hash in the message is the one transformers gives."""
    chktxt, table = converter_table
    src = shared / "models" / "hf-tokenizers" / "llama3"
    d = make_checkpoint(shared, tmp_path / "ckpt", "llama3")
    (d / "tokenizer.json").write_text(json.dumps(change(json.loads((src / "tokenizer.json").read_text())), ensure_ascii=False))
    h = transformers_hash(d, chktxt)
    assert h not in table
    out = tmp_path / "out.gguf"
    r = quantize(deskside_bin, d, out, check=False)
    assert r.returncode == 1, r.stderr[-3000:]
    assert h in r.stderr and str(d / "tokenizer.json") in r.stderr and "pre-tokenizer" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("case", ["llama3-bos", "qwen3"])
def test_llama_completion_generates_as_deskside(deskside_bin, peer_bin, converted, case):
    """The converted file loads in the peer llama.cpp and its greedy text is deskside's."""
    assert_generates_as_llama(deskside_bin, peer_bin, converted[case][1])


def greedy_tokens(deskside_bin, model, *extra):
    r = subprocess.run([str(deskside_bin), "generate", "-m", str(model), "-p", "Once upon a time", "-n", "12", "--temp", "0",
                        "-t", "2", "--json", *extra], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return j["prompt_tokens"], j["tokens"]


@pytest.mark.parametrize("case", ["llama3-bos", "qwen3"])
def test_hf_dir_generates_as_its_converted_file(deskside_bin, converted, case):
    """`generate -m HF_DIR --quantize Q8_0` gives the tokens of `quantize HF_DIR --type q8_0`'s file."""
    d, out = converted[case]
    assert greedy_tokens(deskside_bin, d, "--quantize", "Q8_0") == greedy_tokens(deskside_bin, out)
