"""/v1/embeddings through the official openai client, on stories260K (a llama model without
pooling metadata: last-token pooling by default, mean with --pooling mean). The vectors are
checked against a numpy forward pass written from the GGUF semantics (tests/py), fed the GGUF's
weights as the `gguf` package reads them, then pooled and L2-normalised as OpenAI returns."""
import base64
import subprocess
import sys

import gguf
import numpy as np
import openai
import pytest

from serve_helpers import REPO, STORIES, deskside_binary

sys.path.insert(0, str(REPO / "tests" / "py"))
from test_llama_variants import hidden_states, vocab_from_stories  # noqa: E402

TEXTS = ["Once upon a time", "The cat sat on the mat.", "Lily was happy"]


@pytest.fixture(scope="module")
def weights():
    r = gguf.GGUFReader(str(STORIES))
    return {t.name: np.asarray(t.data, dtype=np.float32) for t in r.tensors}


@pytest.fixture(scope="module")
def exact(start_server):
    """A server with an F32 KV cache: the default F16 one moves values by ~1e-3, more than the
    reference comparison allows."""
    return start_server(STORIES, "--cache-type-k", "f32", "--cache-type-v", "f32", "--ctx-size", 256)


def reference(weights, ids, pooling):
    h = hidden_states(weights, ids, n_head=8, n_head_kv=4, head_dim=8, n_layer=5, rope_freqs=None)
    v = {"last": h[-1], "cls": h[0], "mean": h.mean(0)}[pooling]
    return v / np.linalg.norm(v)


def tokens(server, text):
    return server.post("/tokenize", {"content": text, "add_special": True}).json()["tokens"]


def test_vectors_equal_numpy_reference(exact, weights):
    c = exact.client()
    out = c.embeddings.create(model="stories260K", input=TEXTS, encoding_format="float")
    assert out.object == "list" and out.model == "stories260K"
    assert [d.index for d in out.data] == list(range(len(TEXTS)))
    n_tokens = 0
    for d, text in zip(out.data, TEXTS):
        ids = tokens(exact, text)
        n_tokens += len(ids)
        got = np.array(d.embedding)
        assert got.shape == (64,)
        np.testing.assert_allclose(got, reference(weights, ids, "last"), atol=1e-4)
        assert abs(np.linalg.norm(got) - 1) < 1e-5
    assert out.usage.prompt_tokens == out.usage.total_tokens == n_tokens


def test_base64_token_ids_and_batching(stories):
    c = stories.client()
    floats = [d.embedding for d in c.embeddings.create(model="stories260K", input=TEXTS, encoding_format="float").data]
    # The client's default: it asks for base64 and decodes little-endian float32 itself.
    decoded = [d.embedding for d in c.embeddings.create(model="stories260K", input=TEXTS).data]
    np.testing.assert_array_equal(np.array(decoded, dtype=np.float32), np.array(floats, dtype=np.float32))
    body = {"model": "stories260K", "input": TEXTS[0], "encoding_format": "base64"}
    raw = stories.post("/v1/embeddings", body).json()
    assert np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4").tolist() == \
        np.array(floats[0], dtype=np.float32).tolist()
    for text, whole in zip(TEXTS, floats):
        alone = c.embeddings.create(model="stories260K", input=text, encoding_format="float").data[0].embedding
        assert alone == whole
        ids = tokens(stories, text)
        assert c.embeddings.create(model="stories260K", input=ids, encoding_format="float").data[0].embedding == whole
    lists = c.embeddings.create(model="stories260K", input=[tokens(stories, t) for t in TEXTS], encoding_format="float")
    assert [d.embedding for d in lists.data] == floats
    same = c.embeddings.create(model="stories260K", input=TEXTS[0], dimensions=64, user="u", encoding_format="float")
    assert same.data[0].embedding == floats[0]


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_pooling_flag(start_server, weights, pooling):
    s = start_server(STORIES, "--pooling", pooling, "--cache-type-k", "f32", "--cache-type-v", "f32", "--ctx-size", 256)
    out = s.client().embeddings.create(model="stories260K", input=TEXTS, encoding_format="float")
    for d, text in zip(out.data, TEXTS):
        want = reference(weights, tokens(s, text), pooling)
        np.testing.assert_allclose(np.array(d.embedding), want, atol=1e-4)


def test_bad_pooling_flag_fails_at_start():
    run = subprocess.run([str(deskside_binary()), "serve", "-m", str(STORIES), "--pooling", "rank"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "--pooling" in run.stderr


def stories_with_pooling(path, weights, pooling_type):
    """stories260K rewritten by the `gguf` package's writer with {arch}.pooling_type set."""
    tokens_, scores, types = vocab_from_stories()
    wr = gguf.GGUFWriter(str(path), "llama")
    wr.add_context_length(2048)
    wr.add_embedding_length(64)
    wr.add_block_count(5)
    wr.add_feed_forward_length(172)
    wr.add_head_count(8)
    wr.add_head_count_kv(4)
    wr.add_rope_dimension_count(8)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_pooling_type(pooling_type)
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens_)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_unk_token_id(0)
    for name, w in weights.items():
        wr.add_tensor(name, w)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def test_pooling_from_gguf_metadata(start_server, weights, tmp_path):
    path = tmp_path / "stories-cls.gguf"
    stories_with_pooling(path, weights, gguf.PoolingType.CLS)
    s = start_server(path, "--cache-type-k", "f32", "--cache-type-v", "f32", "--ctx-size", 256)
    out = s.client().embeddings.create(model=s.model_id, input=TEXTS, encoding_format="float")
    for d, text in zip(out.data, TEXTS):
        np.testing.assert_allclose(np.array(d.embedding), reference(weights, tokens(s, text), "cls"), atol=1e-4)


def test_reranker_has_no_embeddings(start_server, weights, tmp_path):
    path = tmp_path / "stories-rank.gguf"
    stories_with_pooling(path, weights, gguf.PoolingType.RANK)
    s = start_server(path, "--ctx-size", 256)
    r = s.post("/v1/embeddings", {"model": s.model_id, "input": "hi"})
    assert r.status_code == 400 and "rank" in r.json()["error"]["message"]


@pytest.mark.parametrize("body,param", [
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": [[]]}, "input[0]"),
    ({"input": ["a", ""]}, "input[1]"),
    ({"input": [1, 100000]}, "input[1]"),
    ({"input": 5}, "input"),
    ({"input": list(range(1, 400)) * 6}, "input"),  # 2394 tokens, over the 2048 context
    ({"input": "hi", "dimensions": 32}, "dimensions"),
    ({"input": "hi", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "hi", "unknown_thing": 1}, "unknown_thing"),
    ({}, "input"),
])
def test_rejections(stories, body, param):
    r = stories.post("/v1/embeddings", dict({"model": "stories260K"}, **body))
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["message"]


def test_client_errors(stories):
    c = stories.client()
    with pytest.raises(openai.BadRequestError):
        c.embeddings.create(model="stories260K", input="hi", dimensions=8)
    with pytest.raises(openai.NotFoundError):
        c.embeddings.create(model="nope", input="hi")
