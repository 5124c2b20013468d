// models::hf_gguf_metadata against a file llama.cpp's converter wrote: llama-2-tiny-random.gguf
// was converted from a Llama-2-shaped checkpoint with Meta's tokenizer.model (the same pieces as
// ../shared/models/llama2-tokenizer.model). A checkpoint of that shape, with that tokenizer.model
// and the tokenizer files of a Llama-2 repository from before added_tokens_decoder, must give
// the file's vocabulary (pieces, scores, types), special ids and hyper-parameters.
// tests/py/test_hf_export.py compares the converted synthetic models with their GGUFs and gguf-py.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "models/gguf.h"
#include "models/hf_gguf_metadata.h"
#include "models/safetensors_test_file.h"
#include "support/paths.h"
#include "support/required.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using deskside::models::GgufFile;
using deskside::models::GgufValue;
using deskside::models::hf_gguf_metadata;
using deskside::test::safetensors_bytes;
using deskside::test::shared_path;
using deskside::test::StTensor;
using deskside::test::write_bytes;
using deskside::test::write_text;
using json = nlohmann::json;

namespace {

using Kv = std::vector<std::pair<std::string, GgufValue>>;

const GgufValue* find(const Kv& kv, const std::string& key) {
    for (const auto& [k, v] : kv)
        if (k == key) return &v;
    return nullptr;
}

size_t position(const Kv& kv, const std::string& key) {
    for (size_t i = 0; i < kv.size(); ++i)
        if (kv[i].first == key) return i;
    FAIL("no key " << key);
    return 0;
}

struct Dir {
    fs::path path;
    explicit Dir(const std::string& name) : path(fs::temp_directory_path() / ("deskside-hfmeta-" + name + "-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~Dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

// Llama-2-tiny-random's shape: 1 layer, embedding 8, 2 heads, FFN 32, the 32000-token vocabulary.
void write_llama2_tiny(const fs::path& d, bool with_tokenizer_model = true) {
    write_text(d / "config.json", json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 8},
                                       {"intermediate_size", 32}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                                       {"num_key_value_heads", 2}, {"max_position_embeddings", 4096}, {"rms_norm_eps", 1e-5},
                                       {"vocab_size", 32000}, {"bos_token_id", 1}, {"eos_token_id", 2}, {"pad_token_id", nullptr},
                                       {"tie_word_embeddings", false}, {"torch_dtype", "float32"}}
                                      .dump(2));
    std::vector<StTensor> t = {{"lm_head.weight", "F32", {32000, 8}, {}}, {"model.embed_tokens.weight", "F32", {32000, 8}, {}},
                               {"model.norm.weight", "F32", {8}, {}}};
    const std::string p = "model.layers.0.";
    for (const char* n : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"}) t.push_back({p + n + ".weight", "F32", {8, 8}, {}});
    t.push_back({p + "mlp.gate_proj.weight", "F32", {32, 8}, {}});
    t.push_back({p + "mlp.up_proj.weight", "F32", {32, 8}, {}});
    t.push_back({p + "mlp.down_proj.weight", "F32", {8, 32}, {}});
    t.push_back({p + "input_layernorm.weight", "F32", {8}, {}});
    t.push_back({p + "post_attention_layernorm.weight", "F32", {8}, {}});
    write_bytes(d / "model.safetensors", safetensors_bytes(t, {{"format", "pt"}}));
    if (with_tokenizer_model) fs::copy_file(shared_path("models/llama2-tokenizer.model"), d / "tokenizer.model");
    json added = json::array();
    for (const auto& [id, text] : {std::pair{0, "<unk>"}, {1, "<s>"}, {2, "</s>"}})
        added.push_back({{"id", id}, {"content", text}, {"special", true}, {"normalized", false}});
    write_text(d / "tokenizer.json",
               json{{"version", "1.0"},
                    {"added_tokens", added},
                    {"model",
                     {{"type", "BPE"}, {"byte_fallback", true}, {"vocab", json::object()}, {"merges", json::array()}}},
                    {"decoder", {{"type", "Sequence"}, {"decoders", json::array()}}}}
                   .dump());
    write_text(d / "tokenizer_config.json", json{{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<s>"},
                                                 {"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"pad_token", nullptr},
                                                 {"tokenizer_class", "LlamaTokenizer"}}
                                                .dump());
}

}  // namespace

TEST_CASE("hf_gguf_metadata: a Llama-2 checkpoint gives the vocabulary and hyper-parameters llama.cpp's converter wrote", "[hf]") {
    const std::string gguf_path = shared_path("models/llama-2-tiny-random.gguf");
    if (!deskside::test::model_or_skip(gguf_path, "the converter's reference file", "see ../shared/models/README.md")) return;
    const GgufFile ref = GgufFile::open(gguf_path);
    Dir dir("llama2");
    write_llama2_tiny(dir.path);
    const Kv kv = hf_gguf_metadata(dir.path.string());

    for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.model",
                            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                            "llama.context_length", "llama.embedding_length", "llama.block_count", "llama.feed_forward_length",
                            "llama.rope.dimension_count", "llama.attention.head_count", "llama.attention.head_count_kv",
                            "llama.attention.layer_norm_rms_epsilon", "general.architecture"}) {
        INFO(key);
        const GgufValue* ours = find(kv, key);
        const GgufValue* theirs = ref.find(key);
        REQUIRE(ours);
        REQUIRE(theirs);
        CHECK(ours->type == theirs->type);
        CHECK(ours->summary(1u << 20) == theirs->summary(1u << 20));
    }
    // Written in the converter's order: general.*, the architecture, then the vocabulary.
    CHECK(kv[0].first == "general.architecture");
    CHECK(kv[1].first == "general.type");
    CHECK(position(kv, "general.name") < position(kv, "llama.block_count"));
    CHECK(position(kv, "llama.block_count") < position(kv, "llama.context_length"));
    CHECK(position(kv, "llama.attention.layer_norm_rms_epsilon") < position(kv, "llama.vocab_size"));
    CHECK(position(kv, "llama.vocab_size") < position(kv, "llama.rope.dimension_count"));
    CHECK(position(kv, "llama.rope.dimension_count") < position(kv, "tokenizer.ggml.model"));
    CHECK(find(kv, "tokenizer.ggml.pre")->as_string() == "default");
    CHECK(find(kv, "tokenizer.ggml.add_bos_token")->as_bool());
    CHECK_FALSE(find(kv, "tokenizer.ggml.add_eos_token")->as_bool());
    // config.json states no rope_theta and no head_dim: the converter writes neither key
    CHECK_FALSE(find(kv, "llama.rope.freq_base"));
    CHECK_FALSE(find(kv, "llama.attention.key_length"));
    CHECK_FALSE(find(kv, "general.file_type"));  // the quantizer's, after these
    CHECK(find(kv, "general.size_label")->as_string() == "513K");  // 2 * 32000 * 8 + 4 * 64 + 3 * 256 + 3 * 8 weights
}

TEST_CASE("hf_gguf_metadata: errors name the file", "[hf]") {
    Dir dir("errors");
    CHECK_THROWS_WITH(hf_gguf_metadata(dir.path.string()), Contains("no config.json"));
    if (!deskside::test::model_or_skip(shared_path("models/llama2-tokenizer.model"), "the tokenizer", "see ../shared/models/README.md")) return;
    write_llama2_tiny(dir.path, false);
    // a SentencePiece-style tokenizer.json alone: llama.cpp's LlamaHfVocab, which deskside does not write
    CHECK_THROWS_WITH(hf_gguf_metadata(dir.path.string()),
                      Contains("tokenizer.json") && Contains("without tokenizer.model"));
    write_text(dir.path / "tokenizer.model", "not a protobuf");
    CHECK_THROWS_WITH(hf_gguf_metadata(dir.path.string()), Contains("tokenizer.model") && Contains("not a SentencePiece model"));
}
