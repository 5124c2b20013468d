// Hugging Face checkpoint directories built by hand (HF module names spelled out here), loaded
// and compared with GGUF files that llama.cpp's tools wrote for models of the same shape: the
// tensor table (names, order, ggml shapes) and the hyperparameters must come out the same.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/hf_checkpoint.h"
#include "models/model.h"
#include "models/safetensors_test_file.h"
#include "support/paths.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using deskside::models::load_hf_checkpoint;
using deskside::models::load_model;
using deskside::models::ModelInfo;
using deskside::test::safetensors_bytes;
using deskside::test::shared_path;
using deskside::test::StTensor;
using deskside::test::write_bytes;
using deskside::test::write_text;
using json = nlohmann::json;

namespace {

// Checkpoint directories under the temp dir, unique to this process, removed at scope exit.
class TempDirs {
   public:
    TempDirs() = default;
    TempDirs(const TempDirs&) = delete;
    TempDirs& operator=(const TempDirs&) = delete;
    ~TempDirs() {
        std::error_code ec;
        for (const fs::path& d : made_) fs::remove_all(d, ec);
    }
    fs::path make(const std::string& name) {
        const fs::path d = fs::temp_directory_path() / ("deskside-hf-" + name + "-" + std::to_string(::getpid()));
        fs::remove_all(d);
        fs::create_directories(d);
        made_.push_back(d);
        return d;
    }

   private:
    std::vector<fs::path> made_;
};

fs::path write_checkpoint(TempDirs& tmp, const std::string& name, const json& config,
                          const std::vector<StTensor>& tensors) {
    const fs::path d = tmp.make(name);
    write_text(d / "config.json", config.dump(2));
    write_bytes(d / "model.safetensors", safetensors_bytes(tensors, {{"format", "pt"}}));
    return d;
}

struct Shape {
    int64_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
};

// Llama / Mistral / Qwen2 module names (transformers modeling_llama.py / modeling_qwen2.py), in
// the alphabetical order save_pretrained tends to produce, so the loader has to sort.
std::vector<StTensor> llama_tensors(const Shape& s, const std::string& dtype, bool qkv_bias, bool lm_head) {
    std::vector<StTensor> t;
    if (lm_head) t.push_back({"lm_head.weight", dtype, {s.n_vocab, s.n_embd}, {}});
    t.push_back({"model.embed_tokens.weight", dtype, {s.n_vocab, s.n_embd}, {}});
    for (int64_t i = 0; i < s.n_layer; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        t.push_back({p + "input_layernorm.weight", "F32", {s.n_embd}, {}});
        t.push_back({p + "mlp.down_proj.weight", dtype, {s.n_embd, s.n_ff}, {}});
        t.push_back({p + "mlp.gate_proj.weight", dtype, {s.n_ff, s.n_embd}, {}});
        t.push_back({p + "mlp.up_proj.weight", dtype, {s.n_ff, s.n_embd}, {}});
        t.push_back({p + "post_attention_layernorm.weight", "F32", {s.n_embd}, {}});
        const int64_t q = s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
        if (qkv_bias) t.push_back({p + "self_attn.k_proj.bias", dtype, {kv}, {}});
        t.push_back({p + "self_attn.k_proj.weight", dtype, {kv, s.n_embd}, {}});
        t.push_back({p + "self_attn.o_proj.weight", dtype, {s.n_embd, q}, {}});
        if (qkv_bias) t.push_back({p + "self_attn.q_proj.bias", dtype, {q}, {}});
        t.push_back({p + "self_attn.q_proj.weight", dtype, {q, s.n_embd}, {}});
        if (qkv_bias) t.push_back({p + "self_attn.v_proj.bias", dtype, {kv}, {}});
        t.push_back({p + "self_attn.v_proj.weight", dtype, {kv, s.n_embd}, {}});
    }
    t.push_back({"model.norm.weight", "F32", {s.n_embd}, {}});
    return t;
}

// Gemma 3 module names (transformers modeling_gemma3.py), below `prefix` ("model." for
// Gemma3ForCausalLM, "language_model.model." for Gemma3ForConditionalGeneration).
std::vector<StTensor> gemma3_tensors(const Shape& s, const std::string& dtype, const std::string& prefix) {
    std::vector<StTensor> t;
    t.push_back({prefix + "embed_tokens.weight", dtype, {s.n_vocab, s.n_embd}, {}});
    for (int64_t i = 0; i < s.n_layer; ++i) {
        const std::string p = prefix + "layers." + std::to_string(i) + ".";
        for (const char* norm :
             {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"})
            t.push_back({p + norm + ".weight", dtype, {s.n_embd}, {}});
        t.push_back({p + "mlp.down_proj.weight", dtype, {s.n_embd, s.n_ff}, {}});
        t.push_back({p + "mlp.gate_proj.weight", dtype, {s.n_ff, s.n_embd}, {}});
        t.push_back({p + "mlp.up_proj.weight", dtype, {s.n_ff, s.n_embd}, {}});
        t.push_back({p + "self_attn.k_norm.weight", dtype, {s.head_dim}, {}});
        t.push_back({p + "self_attn.k_proj.weight", dtype, {s.n_head_kv * s.head_dim, s.n_embd}, {}});
        t.push_back({p + "self_attn.o_proj.weight", dtype, {s.n_embd, s.n_head * s.head_dim}, {}});
        t.push_back({p + "self_attn.q_norm.weight", dtype, {s.head_dim}, {}});
        t.push_back({p + "self_attn.q_proj.weight", dtype, {s.n_head * s.head_dim, s.n_embd}, {}});
        t.push_back({p + "self_attn.v_proj.weight", dtype, {s.n_head_kv * s.head_dim, s.n_embd}, {}});
    }
    t.push_back({prefix + "norm.weight", dtype, {s.n_embd}, {}});
    return t;
}

void check_same_tensor_table(const ModelInfo& hf, const ModelInfo& gguf) {
    REQUIRE(hf.tensors.size() == gguf.tensors.size());
    for (size_t k = 0; k < hf.tensors.size(); ++k) {
        INFO("tensor #" << k << " " << gguf.tensors[k].name);
        CHECK(hf.tensors[k].name == gguf.tensors[k].name);
        CHECK(hf.tensors[k].shape == gguf.tensors[k].shape);
    }
}

// llama-quantize's files list tensors in their own order; compare the tables as sets.
void check_same_tensor_set(const ModelInfo& hf, const ModelInfo& gguf) {
    const auto table = [](const ModelInfo& m) {
        std::vector<std::pair<std::string, std::vector<int64_t>>> t;
        for (const auto& x : m.tensors) t.push_back({x.name, x.shape});
        std::sort(t.begin(), t.end());
        return t;
    };
    CHECK(table(hf) == table(gguf));
}

void check_same_hparams(const deskside::models::Hparams& a, const deskside::models::Hparams& b) {
    CHECK(a.architecture == b.architecture);
    CHECK(a.n_layer == b.n_layer);
    CHECK(a.n_embd == b.n_embd);
    CHECK(a.n_head == b.n_head);
    CHECK(a.n_head_kv == b.n_head_kv);
    CHECK(a.head_dim == b.head_dim);
    CHECK(a.head_dim_v == b.head_dim_v);
    CHECK(a.n_ff == b.n_ff);
    CHECK(a.n_ctx_train == b.n_ctx_train);
    CHECK(a.n_vocab == b.n_vocab);
    CHECK(a.norm_eps == Approx(b.norm_eps));
    CHECK(a.n_rot == b.n_rot);
    CHECK(a.rope_freq_base == b.rope_freq_base);
    CHECK(a.rope_freq_base_swa == b.rope_freq_base_swa);
    CHECK(a.rope_scaling == b.rope_scaling);
    CHECK(a.sliding_window == b.sliding_window);
    CHECK(a.tied_embeddings == b.tied_embeddings);
    for (int64_t il = 0; il < a.n_layer; ++il) CHECK(a.layer_is_swa(il) == b.layer_is_swa(il));
}

}  // namespace

TEST_CASE("HF gemma3 checkpoint maps onto synth-gemma3.gguf's tensors and hparams", "[hf]") {
    TempDirs tmp;
    const ModelInfo gguf = load_model(shared_path("models/synth-gemma3.gguf"));
    const Shape s{6, 256, 4, 1, 128, 768, 512};
    const json config = {{"architectures", {"Gemma3ForCausalLM"}},
                         {"model_type", "gemma3_text"},
                         {"num_hidden_layers", 6},
                         {"hidden_size", 256},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 1},
                         {"head_dim", 128},
                         {"intermediate_size", 768},
                         {"vocab_size", 512},
                         {"max_position_embeddings", 512},
                         {"rms_norm_eps", 1e-6},
                         {"rope_theta", 1e6},
                         {"rope_local_base_freq", 1e4},
                         {"sliding_window", 32},
                         {"sliding_window_pattern", 3},
                         {"rope_scaling", nullptr}};
    const fs::path dir = write_checkpoint(tmp, "gemma3", config, gemma3_tensors(s, "BF16", "model."));
    const ModelInfo hf = load_hf_checkpoint(dir.string());
    CHECK(hf.format == "safetensors");
    check_same_tensor_table(hf, gguf);
    check_same_hparams(hf.hparams, gguf.hparams);
    CHECK(hf.hparams.rope_neox == gguf.hparams.rope_neox);
    // GGUF files hold 1 + w; HF files hold w.
    CHECK(hf.hparams.norm_weight_plus_one);
    CHECK_FALSE(gguf.hparams.norm_weight_plus_one);
    CHECK(hf.tensors[0].type == deskside::quant::TypeId::BF16);
    CHECK(hf.tokenizer.kind == "none");
}

TEST_CASE("HF qwen2 checkpoint maps onto synth-qwen2.gguf", "[hf]") {
    TempDirs tmp;
    const ModelInfo gguf = load_model(shared_path("models/synth-qwen2.gguf"));
    const Shape s{4, 256, 4, 2, 64, 768, 512};
    const json config = {{"architectures", {"Qwen2ForCausalLM"}},
                         {"model_type", "qwen2"},
                         {"num_hidden_layers", 4},
                         {"hidden_size", 256},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"intermediate_size", 768},
                         {"vocab_size", 512},
                         {"max_position_embeddings", 512},
                         {"rms_norm_eps", 1e-6},
                         {"rope_theta", 1e6},
                         {"tie_word_embeddings", true},
                         {"use_sliding_window", false},
                         {"sliding_window", 4096},
                         {"max_window_layers", 2}};
    const fs::path dir = write_checkpoint(tmp, "qwen2", config, llama_tensors(s, "F16", true, false));
    const ModelInfo hf = load_hf_checkpoint(dir.string());
    check_same_tensor_table(hf, gguf);
    check_same_hparams(hf.hparams, gguf.hparams);
    CHECK(hf.hparams.rope_neox);
    CHECK_FALSE(hf.hparams.norm_weight_plus_one);
}

TEST_CASE("HF qwen3 checkpoint maps onto synth-qwen3-q8_0.gguf: per-head Q/K norms, no biases", "[hf]") {
    TempDirs tmp;
    const ModelInfo gguf = load_model(shared_path("models/synth-qwen3-q8_0.gguf"));
    const Shape s{2, 256, 4, 2, 128, 512, 512};
    const json config = {{"architectures", {"Qwen3ForCausalLM"}},
                         {"model_type", "qwen3"},
                         {"num_hidden_layers", 2},
                         {"hidden_size", 256},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"head_dim", 128},
                         {"intermediate_size", 512},
                         {"vocab_size", 512},
                         {"max_position_embeddings", 512},
                         {"rms_norm_eps", 1e-6},
                         {"rope_theta", 1e6},
                         {"tie_word_embeddings", true}};
    std::vector<StTensor> tensors = llama_tensors(s, "BF16", false, false);
    for (int64_t i = 0; i < s.n_layer; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        tensors.push_back({p + "self_attn.q_norm.weight", "BF16", {s.head_dim}, {}});
        tensors.push_back({p + "self_attn.k_norm.weight", "BF16", {s.head_dim}, {}});
    }
    const ModelInfo hf = load_hf_checkpoint(write_checkpoint(tmp, "qwen3", config, tensors).string());
    // That file lists a block's tensors alphabetically; compare the tables as sets.
    check_same_tensor_set(hf, gguf);
    check_same_hparams(hf.hparams, gguf.hparams);
    CHECK(hf.hparams.rope_neox);
}

namespace {

// Qwen3MoeForCausalLM's module names: Qwen 3's attention, the router "mlp.gate" and one module per
// expert (what transformers' save_pretrained writes, its fused in-memory experts split back).
json qwen3moe_config() {
    return {{"architectures", {"Qwen3MoeForCausalLM"}},
            {"model_type", "qwen3_moe"},
            {"num_hidden_layers", 2},
            {"hidden_size", 256},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"head_dim", 64},
            {"intermediate_size", 768},
            {"vocab_size", 512},
            {"max_position_embeddings", 512},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", 1e6},
            {"num_experts", 8},
            {"num_experts_per_tok", 2},
            {"moe_intermediate_size", 256},
            {"norm_topk_prob", true},
            {"decoder_sparse_step", 1},
            {"mlp_only_layers", json::array()},
            {"tie_word_embeddings", false}};
}

// Expert e's down_proj of layer 0 holds the byte e + 1 everywhere, to see the stacking order.
std::vector<StTensor> qwen3moe_tensors(int64_t n_expert) {
    const Shape s{2, 256, 4, 2, 64, 768, 512};
    std::vector<StTensor> t = llama_tensors(s, "BF16", false, true);
    std::erase_if(t, [](const StTensor& x) { return x.name.find(".mlp.") != std::string::npos; });
    for (int64_t i = 0; i < s.n_layer; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        t.push_back({p + "self_attn.q_norm.weight", "BF16", {64}, {}});
        t.push_back({p + "self_attn.k_norm.weight", "BF16", {64}, {}});
        t.push_back({p + "mlp.gate.weight", "BF16", {8, 256}, {}});
        for (int64_t e = 0; e < n_expert; ++e) {
            const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
            t.push_back({x + "gate_proj.weight", "BF16", {256, 256}, {}});
            t.push_back({x + "up_proj.weight", "BF16", {256, 256}, {}});
            t.push_back({x + "down_proj.weight",
                         "BF16",
                         {256, 256},
                         std::vector<uint8_t>(256 * 256 * 2, static_cast<uint8_t>(e + 1))});
        }
    }
    return t;
}

}  // namespace

TEST_CASE("HF qwen3moe checkpoint: per-expert tensors stacked into synth-qwen3moe-q8_0.gguf's merged experts", "[hf]") {
    TempDirs tmp;
    const ModelInfo gguf = load_model(shared_path("models/synth-qwen3moe-q8_0.gguf"));
    const ModelInfo hf =
        load_hf_checkpoint(write_checkpoint(tmp, "qwen3moe", qwen3moe_config(), qwen3moe_tensors(8)).string());
    check_same_tensor_set(hf, gguf);
    check_same_hparams(hf.hparams, gguf.hparams);
    CHECK(hf.hparams.n_expert == gguf.hparams.n_expert);
    CHECK(hf.hparams.n_expert_used == gguf.hparams.n_expert_used);
    CHECK(hf.hparams.n_ff_exp == gguf.hparams.n_ff_exp);
    const deskside::models::Tensor* down = hf.find("blk.0.ffn_down_exps.weight");
    REQUIRE(down);
    CHECK(down->shape == std::vector<int64_t>{256, 256, 8});  // [n_ff_exp, n_embd, n_expert]
    REQUIRE(down->n_bytes == 8u * 256 * 256 * 2);
    for (size_t e = 0; e < 8; ++e) {
        const uint8_t* slice = down->data + e * 256 * 256 * 2;
        CHECK(std::all_of(slice, slice + 256 * 256 * 2, [&](uint8_t b) { return b == e + 1; }));
    }

    SECTION("configs the family cannot run are refused, naming the key") {
        for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{{"decoder_sparse_step", 2},
                                                                                  {"mlp_only_layers", {1}},
                                                                                  {"norm_topk_prob", false},
                                                                                  {"use_sliding_window", true}}) {
            json c = qwen3moe_config();
            c[key] = value;
            if (key == "use_sliding_window") c["sliding_window"] = 64;
            const fs::path d = write_checkpoint(tmp, "qwen3moe-" + key, c, qwen3moe_tensors(8));
            CHECK_THROWS_WITH(load_hf_checkpoint(d.string()), Contains("field '" + key + "'"));
        }
        json c = qwen3moe_config();
        c.erase("norm_topk_prob");  // Qwen3MoeConfig's default is false
        CHECK_THROWS_WITH(load_hf_checkpoint(write_checkpoint(tmp, "qwen3moe-norm", c, qwen3moe_tensors(8)).string()),
                          Contains("field 'norm_topk_prob'"));
    }
    SECTION("a missing expert, or one beyond num_experts") {
        CHECK_THROWS_WITH(
            load_hf_checkpoint(write_checkpoint(tmp, "qwen3moe-7", qwen3moe_config(), qwen3moe_tensors(7)).string()),
            Contains("has no expert 7 for blk.0.ffn_down_exps.weight"));
        CHECK_THROWS_WITH(
            load_hf_checkpoint(write_checkpoint(tmp, "qwen3moe-9", qwen3moe_config(), qwen3moe_tensors(9)).string()),
            Contains("is expert 8, but config.json has 8 experts"));
    }
    SECTION("transformers 5's num_local_experts") {
        json c = qwen3moe_config();
        c.erase("num_experts");
        c["num_local_experts"] = 8;
        CHECK(load_hf_checkpoint(write_checkpoint(tmp, "qwen3moe-local", c, qwen3moe_tensors(8)).string())
                  .hparams.n_expert == 8);
    }
}

namespace {

json phi3_config() {
    std::vector<double> short_factor(32, 1.5), long_factor(32, 4.0);
    return {{"architectures", {"Phi3ForCausalLM"}},
            {"model_type", "phi3"},
            {"num_hidden_layers", 2},
            {"hidden_size", 256},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"intermediate_size", 512},
            {"vocab_size", 512},
            {"max_position_embeddings", 131072},
            {"original_max_position_embeddings", 4096},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 10000.0},
            {"sliding_window", nullptr},
            {"tie_word_embeddings", false},
            {"rope_scaling", {{"type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor}}}};
}

std::vector<StTensor> phi3_tensors() {
    std::vector<StTensor> t{{"model.embed_tokens.weight", "F16", {512, 256}, {}},
                            {"lm_head.weight", "F16", {512, 256}, {}},
                            {"model.norm.weight", "F16", {256}, {}}};
    for (int i = 0; i < 2; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        t.push_back({p + "input_layernorm.weight", "F16", {256}, {}});
        t.push_back({p + "self_attn.qkv_proj.weight", "F16", {256 + 128 + 128, 256}, {}});
        t.push_back({p + "self_attn.o_proj.weight", "F16", {256, 256}, {}});
        t.push_back({p + "post_attention_layernorm.weight", "F16", {256}, {}});
        t.push_back({p + "mlp.gate_up_proj.weight", "F16", {1024, 256}, {}});
        t.push_back({p + "mlp.down_proj.weight", "F16", {256, 512}, {}});
    }
    return t;
}

}  // namespace

// A gpt-oss checkpoint as OpenAI ships it (transformers modeling_gpt_oss.py, integrations/mxfp4.py):
// 2 layers, n_embd 64, 4 heads x 16, 2 KV heads, 4 experts of FFN 32, vocabulary 100.
json gpt_oss_config() {
    return {{"model_type", "gpt_oss"},
            {"architectures", {"GptOssForCausalLM"}},
            {"num_hidden_layers", 2},
            {"hidden_size", 64},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"head_dim", 16},
            {"intermediate_size", 32},
            {"vocab_size", 100},
            {"num_local_experts", 4},
            {"num_experts_per_tok", 2},
            {"sliding_window", 16},
            {"max_position_embeddings", 131072}};
}

// OpenAI's MXFP4 block byte i holds values 2i and 2i + 1; value v is v % 16 here, so GGUF's byte j
// (values j and j + 16) is j * 17. Scale bytes count the rows of all experts.
std::vector<StTensor> gpt_oss_tensors() {
    constexpr int64_t kExperts = 4, kEmbd = 64, kFf = 32;
    std::vector<StTensor> t = llama_tensors({2, kEmbd, 4, 2, 16, kFf, 100}, "F32", true, true);
    std::erase_if(t, [](const StTensor& x) { return x.name.find(".mlp.") != std::string::npos; });
    const auto mxfp4 = [&](const std::string& p, int64_t rows, int64_t cols) {
        std::vector<uint8_t> blocks, scales;
        for (int64_t r = 0; r < kExperts * rows; ++r) {
            for (int64_t b = 0; b < cols / 32; ++b) {
                scales.push_back(static_cast<uint8_t>(r));
                for (int i = 0; i < 16; ++i)
                    blocks.push_back(static_cast<uint8_t>((2 * i) % 16 | ((2 * i + 1) % 16) << 4));
            }
        }
        t.push_back({p + "_blocks", "U8", {kExperts, rows, cols / 32, 16}, blocks});
        t.push_back({p + "_scales", "U8", {kExperts, rows, cols / 32}, scales});
    };
    for (int i = 0; i < 2; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        t.push_back({p + "self_attn.sinks", "F32", {4}, {}});
        t.push_back({p + "mlp.router.weight", "F32", {kExperts, kEmbd}, {}});
        t.push_back({p + "mlp.router.bias", "F32", {kExperts}, {}});
        mxfp4(p + "mlp.experts.gate_up_proj", 2 * kFf, kEmbd);
        mxfp4(p + "mlp.experts.down_proj", kEmbd, kFf);
        std::vector<uint8_t> bias;
        for (int64_t k = 0; k < kExperts * 2 * kFf; ++k) {
            const float v = static_cast<float>(k);
            bias.insert(bias.end(), reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 4);
        }
        t.push_back({p + "mlp.experts.gate_up_proj_bias", "F32", {kExperts, 2 * kFf}, bias});
        t.push_back({p + "mlp.experts.down_proj_bias", "F32", {kExperts, kEmbd}, {}});
    }
    return t;
}

TEST_CASE("HF gpt-oss checkpoint: MXFP4 experts repacked, gate and up split from gate_up's rows", "[hf]") {
    TempDirs tmp;
    const ModelInfo hf =
        load_hf_checkpoint(write_checkpoint(tmp, "gptoss", gpt_oss_config(), gpt_oss_tensors()).string());
    const deskside::models::Hparams& hp = hf.hparams;
    CHECK(hp.architecture == "gpt-oss");
    CHECK(hp.n_expert == 4);
    CHECK(hp.n_expert_used == 2);
    CHECK(hp.n_ff_exp == 32);
    CHECK(hp.sliding_window == 16);
    CHECK(hp.sliding_window_pattern == 2);  // GptOssConfig's layer_types: even layers slide
    CHECK(hp.rope_scaling == deskside::models::RopeScaling::Yarn);
    CHECK(hp.rope_scaling_factor == 32.0);
    CHECK(hp.rope_orig_ctx == 4096);
    CHECK(hp.rope_freq_base == 150000.0);
    for (const char* name : {"blk.1.attn_sinks.weight", "blk.1.post_attention_norm.weight", "blk.1.ffn_gate_inp.bias",
                             "blk.1.attn_q.bias", "blk.1.ffn_down_exps.bias"})
        CHECK(hf.find(name));

    const deskside::models::Tensor* gate = hf.find("blk.0.ffn_gate_exps.weight");
    const deskside::models::Tensor* up = hf.find("blk.0.ffn_up_exps.weight");
    const deskside::models::Tensor* down = hf.find("blk.1.ffn_down_exps.weight");
    REQUIRE((gate && up && down));
    CHECK(gate->type == deskside::quant::TypeId::MXFP4);
    CHECK(gate->shape == std::vector<int64_t>{64, 32, 4});  // [n_embd, n_ff_exp, n_expert]
    CHECK(down->shape == std::vector<int64_t>{32, 64, 4});  // [n_ff_exp, n_embd, n_expert]
    REQUIRE(gate->n_bytes == 4u * 32 * 2 * 17);
    for (int64_t e = 0; e < 4; ++e) {
        for (int64_t r = 0; r < 32; ++r) {
            for (int64_t b = 0; b < 2; ++b) {
                const size_t at = static_cast<size_t>(((e * 32 + r) * 2 + b) * 17);
                // source row e * 64 + 2r (gate) or + 1 (up): its number is the scale byte
                CHECK(gate->data[at] == static_cast<uint8_t>(e * 64 + 2 * r));
                CHECK(up->data[at] == static_cast<uint8_t>(e * 64 + 2 * r + 1));
                for (int j = 0; j < 16; ++j) CHECK(gate->data[at + 1 + j] == j * 17);
            }
        }
    }
    const deskside::models::Tensor* up_bias = hf.find("blk.0.ffn_up_exps.bias");
    REQUIRE(up_bias);
    CHECK(up_bias->shape == std::vector<int64_t>{32, 4});
    const float* ub = reinterpret_cast<const float*>(up_bias->data);
    CHECK(ub[0] == 1.0f);
    CHECK(ub[32] == 65.0f);  // expert 1, element 0: source element 64 + 1

    SECTION("configs the family cannot run are refused, naming the key") {
        for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
                 {"swiglu_limit", 5.0}, {"attention_bias", false}, {"num_experts_per_tok", 5}}) {
            json c = gpt_oss_config();
            c[key] = value;
            CHECK_THROWS_WITH(load_hf_checkpoint(write_checkpoint(tmp, "gptoss-" + key, c, gpt_oss_tensors()).string()),
                              Contains("field '" + key + "'"));
        }
    }
    SECTION("scales without blocks") {
        std::vector<StTensor> t = gpt_oss_tensors();
        std::erase_if(t, [](const StTensor& x) { return x.name == "model.layers.0.mlp.experts.down_proj_blocks"; });
        CHECK_THROWS_WITH(load_hf_checkpoint(write_checkpoint(tmp, "gptoss-noblocks", gpt_oss_config(), t).string()),
                          Contains("down_proj_scales' has no _blocks"));
    }
}

TEST_CASE("HF phi3 checkpoint: fused tensors as synth-phi3-q8_0.gguf, LongRoPE factors made from config.json", "[hf]") {
    TempDirs tmp;
    const ModelInfo gguf = load_model(shared_path("models/synth-phi3-q8_0.gguf"));
    const ModelInfo hf = load_hf_checkpoint(write_checkpoint(tmp, "phi3", phi3_config(), phi3_tensors()).string());
    check_same_tensor_set(hf, gguf);
    check_same_hparams(hf.hparams, gguf.hparams);
    CHECK(hf.hparams.rope_orig_ctx == gguf.hparams.rope_orig_ctx);
    CHECK(static_cast<float>(hf.hparams.rope_attn_factor) == static_cast<float>(gguf.hparams.rope_attn_factor));
    const deskside::models::Tensor* f = hf.find("rope_factors_long.weight");
    REQUIRE(f);
    REQUIRE(f->n_bytes == 32 * sizeof(float));
    float v[32];
    std::memcpy(v, f->data, sizeof v);
    CHECK(std::all_of(v, v + 32, [](float x) { return x == 4.0f; }));

    SECTION("factor lists of the wrong length, other attention factors, longrope elsewhere are refused") {
        json c = phi3_config();
        c["rope_scaling"]["short_factor"] = std::vector<double>(31, 1.0);
        CHECK_THROWS_WITH(load_hf_checkpoint(write_checkpoint(tmp, "phi3-len", c, phi3_tensors()).string()),
                          Contains("field 'rope_scaling.short_factor': expected a list of 32 numbers"));
        c = phi3_config();
        c["rope_scaling"]["attention_factor"] = 1.0;
        CHECK_THROWS_WITH(load_hf_checkpoint(write_checkpoint(tmp, "phi3-attn", c, phi3_tensors()).string()),
                          Contains("field 'rope_scaling.attention_factor'"));
        c = phi3_config();
        c["partial_rotary_factor"] = 0.75;  // Phi-4-mini
        CHECK_THROWS_WITH(load_hf_checkpoint(write_checkpoint(tmp, "phi3-partial", c, phi3_tensors()).string()),
                          Contains("field 'partial_rotary_factor'"));
    }
    SECTION("without rope_scaling: no factors, the short context is the trained one") {
        json c = phi3_config();
        c.erase("rope_scaling");
        c["max_position_embeddings"] = 4096;
        const ModelInfo m = load_hf_checkpoint(write_checkpoint(tmp, "phi3-plain", c, phi3_tensors()).string());
        CHECK_FALSE(m.find("rope_factors_short.weight"));
        CHECK(m.hparams.rope_attn_factor == 1.0);
    }
}

TEST_CASE("HF llama checkpoint maps onto synth-k.gguf, with NEOX RoPE for unpermuted Q/K", "[hf]") {
    TempDirs tmp;
    const ModelInfo gguf = load_model(shared_path("models/synth-k.gguf"));
    const Shape s{4, 256, 8, 2, 32, 768, 512};
    const json config = {{"architectures", {"LlamaForCausalLM"}},
                         {"model_type", "llama"},
                         {"num_hidden_layers", 4},
                         {"hidden_size", 256},
                         {"num_attention_heads", 8},
                         {"num_key_value_heads", 2},
                         {"intermediate_size", 768},
                         {"vocab_size", 512},
                         {"max_position_embeddings", 512},
                         {"rms_norm_eps", 1e-5},
                         {"rope_theta", 10000.0},
                         {"tie_word_embeddings", false}};
    const fs::path dir = write_checkpoint(tmp, "llama", config, llama_tensors(s, "F32", false, true));
    const ModelInfo hf = load_hf_checkpoint(dir.string());
    check_same_tensor_table(hf, gguf);
    check_same_hparams(hf.hparams, gguf.hparams);
    // llama.cpp's converter permutes Q/K rows for adjacent-pair RoPE; HF files rotate halves.
    CHECK_FALSE(gguf.hparams.rope_neox);
    CHECK(hf.hparams.rope_neox);

    // Tensor data is a view into the mapping: the embedding's bytes follow lm_head's in the
    // file (lm_head was written first), so the two pointers are one tensor apart.
    const auto* emb = hf.find("token_embd.weight");
    const auto* out = hf.find("output.weight");
    REQUIRE((emb && out));
    CHECK(emb->data == out->data + out->n_bytes);
    CHECK(emb->n_bytes == 512u * 256u * 4u);
}

TEST_CASE("HF config variants: mistral, rope scaling, multimodal gemma3, tied heads", "[hf]") {
    TempDirs tmp;
    const Shape s{2, 64, 4, 2, 16, 128, 100};
    const json base = {{"num_hidden_layers", 2},        {"hidden_size", 64},        {"num_attention_heads", 4},
                       {"num_key_value_heads", 2},      {"intermediate_size", 128}, {"vocab_size", 100},
                       {"max_position_embeddings", 256}};
    SECTION("mistral is llama with a sliding window on every layer; eps and theta default as in MistralConfig") {
        json config = base;
        config["model_type"] = "mistral";
        config["sliding_window"] = 48;
        const ModelInfo m = load_hf_checkpoint(
            write_checkpoint(tmp, "mistral", config, llama_tensors(s, "BF16", false, true)).string());
        CHECK(m.hparams.architecture == "llama");
        CHECK(m.hparams.sliding_window == 48);
        CHECK(m.hparams.layer_is_swa(0));
        CHECK(m.hparams.layer_is_swa(1));
        CHECK(m.hparams.norm_eps == 1e-6);
        CHECK(m.hparams.rope_freq_base == 10000.0);
        CHECK_FALSE(m.hparams.tied_embeddings);
        config["sliding_window"] = nullptr;  // Mistral v0.2+: no window
        const ModelInfo m2 = load_hf_checkpoint(
            write_checkpoint(tmp, "mistral", config, llama_tensors(s, "BF16", false, true)).string());
        CHECK(m2.hparams.sliding_window == 0);
    }
    SECTION("llama3 rope scaling, and a tied head when lm_head is absent") {
        json config = base;
        config["architectures"] = {"LlamaForCausalLM"};
        config["rope_scaling"] = {{"rope_type", "llama3"},
                                  {"factor", 8.0},
                                  {"low_freq_factor", 1.0},
                                  {"high_freq_factor", 4.0},
                                  {"original_max_position_embeddings", 8192}};
        const ModelInfo m =
            load_hf_checkpoint(write_checkpoint(tmp, "llama3", config, llama_tensors(s, "F16", false, false)).string());
        CHECK(m.hparams.rope_scaling == deskside::models::RopeScaling::Llama3);
        CHECK(m.hparams.rope_scaling_factor == 8.0);
        CHECK(m.hparams.rope_orig_ctx == 8192);
        CHECK(m.hparams.rope_llama3_high_freq_factor == 4.0);
        CHECK(m.hparams.tied_embeddings);
        CHECK(m.find("output.weight") == nullptr);
    }
    SECTION("tie_word_embeddings drops a saved lm_head, as transformers ties it to the embedding") {
        json config = base;
        config["model_type"] = "qwen2";
        config["tie_word_embeddings"] = true;
        config["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
        const ModelInfo m = load_hf_checkpoint(
            write_checkpoint(tmp, "qwen2-tied", config, llama_tensors(s, "F32", true, true)).string());
        CHECK(m.hparams.tied_embeddings);
        CHECK(m.find("output.weight") == nullptr);
        CHECK(m.hparams.rope_scaling == deskside::models::RopeScaling::Yarn);
        CHECK(m.hparams.rope_orig_ctx == 64);
    }
    SECTION("qwen2 with use_sliding_window: layers from max_window_layers on slide") {
        json config = base;
        config["model_type"] = "qwen2";
        config["use_sliding_window"] = true;
        config["sliding_window"] = 32;
        config["max_window_layers"] = 1;
        const ModelInfo m = load_hf_checkpoint(
            write_checkpoint(tmp, "qwen2-swa", config, llama_tensors(s, "F32", true, true)).string());
        CHECK(m.hparams.sliding_window == 32);
        CHECK_FALSE(m.hparams.layer_is_swa(0));
        CHECK(m.hparams.layer_is_swa(1));
    }
    SECTION("Gemma3ForConditionalGeneration: text_config over Gemma3TextConfig defaults, vision tensors skipped") {
        const Shape g{2, 64, 8, 4, 256, 128, 100};  // heads, KV heads and head_dim from the defaults
        const json config = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                             {"model_type", "gemma3"},
                             {"text_config",
                              {{"hidden_size", 64},
                               {"intermediate_size", 128},
                               {"model_type", "gemma3_text"},
                               {"num_hidden_layers", 2},
                               {"vocab_size", 100},
                               {"sliding_window", 16},
                               {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}}}},
                             {"eos_token_id", {1, 106}}};
        auto tensors = gemma3_tensors(g, "BF16", "language_model.model.");
        tensors.push_back({"vision_tower.vision_model.embeddings.patch_embedding.weight", "F32", {4, 3, 2, 2}, {}});
        tensors.push_back({"multi_modal_projector.mm_input_projection_weight", "I64", {2, 2}, {}});
        const ModelInfo m = load_hf_checkpoint(write_checkpoint(tmp, "gemma3mm", config, tensors).string());
        CHECK(m.hparams.architecture == "gemma3");
        CHECK(m.hparams.n_head == 8);
        CHECK(m.hparams.n_head_kv == 4);
        CHECK(m.hparams.head_dim == 256);
        CHECK(m.hparams.n_ctx_train == 131072);
        CHECK(m.hparams.rope_freq_base == 1e6);
        CHECK(m.hparams.rope_freq_base_swa == 1e4);
        CHECK(m.hparams.sliding_window == 16);
        CHECK(m.hparams.rope_scaling == deskside::models::RopeScaling::Linear);
        CHECK(m.hparams.rope_scaling_factor == 8.0);
        CHECK(m.hparams.tied_embeddings);
        CHECK(m.hparams.norm_weight_plus_one);
        CHECK(m.find("blk.1.post_ffw_norm.weight") != nullptr);
        CHECK(m.tensors.size() == 2 + 2 * 13);
    }
    SECTION("transformers 5 layer_types and rope_parameters") {
        json config = base;
        config["model_type"] = "gemma3_text";
        config["num_hidden_layers"] = 4;
        config["head_dim"] = 16;
        config["sliding_window"] = 8;
        config["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
        config["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 5e5}}},
                                     {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 2e4}}}};
        const Shape g{4, 64, 4, 2, 16, 128, 100};
        const ModelInfo m =
            load_hf_checkpoint(write_checkpoint(tmp, "gemma3v5", config, gemma3_tensors(g, "F32", "model.")).string());
        CHECK(m.hparams.sliding_window_pattern == 2);
        CHECK(m.hparams.layer_is_swa(2));
        CHECK_FALSE(m.hparams.layer_is_swa(3));
        CHECK(m.hparams.rope_freq_base == 5e5);
        CHECK(m.hparams.rope_freq_base_swa == 2e4);
    }
}

TEST_CASE("HF checkpoint errors name the file and the problem", "[hf]") {
    TempDirs tmp;
    const Shape s{2, 64, 4, 2, 16, 128, 100};
    const json config = {{"model_type", "llama"},    {"num_hidden_layers", 2},   {"hidden_size", 64},
                         {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 128},
                         {"vocab_size", 100}};
    SECTION("no config.json") {
        const fs::path d = tmp.make("noconfig");
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()), Contains("no config.json"));
    }
    SECTION("unsupported architecture") {
        const json c = {{"model_type", "deepseek_v3"}, {"architectures", {"DeepseekV3ForCausalLM"}}};
        const fs::path d = write_checkpoint(tmp, "deepseek", c, llama_tensors(s, "F32", false, true));
        CHECK_THROWS_WITH(
            load_hf_checkpoint(d.string()),
            Contains("config.json: model_type 'deepseek_v3' (architectures: DeepseekV3ForCausalLM) is not supported"));
    }
    SECTION("unsupported rope scaling") {
        json c = config;
        c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
        const fs::path d = write_checkpoint(tmp, "dyn", c, llama_tensors(s, "F32", false, true));
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()),
                          Contains("field 'rope_scaling.type': rope scaling 'dynamic' is not supported"));
    }
    SECTION("wrongly typed config field") {
        json c = config;
        c["hidden_size"] = "64";
        const fs::path d = write_checkpoint(tmp, "badtype", c, llama_tensors(s, "F32", false, true));
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()), Contains("field 'hidden_size': expected an integer"));
    }
    SECTION("unsupported dtype") {
        auto t = llama_tensors(s, "F32", false, true);
        t[3].dtype = "I32";
        const fs::path d = write_checkpoint(tmp, "i32", config, t);
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()), Contains("tensor '" + t[3].name + "'") &&
                                                              Contains("dtype I32 is not supported") &&
                                                              Contains("byte offset"));
    }
    SECTION("unknown tensor") {
        auto t = llama_tensors(s, "F32", false, true);
        t.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {8}, {}});  // ignored
        t.push_back({"model.layers.0.mlp.experts.0.weight", "F32", {8}, {}});
        const fs::path d = write_checkpoint(tmp, "unknown", config, t);
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()),
                          Contains("tensor 'model.layers.0.mlp.experts.0.weight' is not part of a llama checkpoint"));
    }
    SECTION("layer beyond num_hidden_layers") {
        json c = config;
        c["num_hidden_layers"] = 1;
        const fs::path d = write_checkpoint(tmp, "layers", c, llama_tensors(s, "F32", false, true));
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()), Contains("belongs to layer 1, but config.json has 1 layers"));
    }
    SECTION("embedding shape disagrees with the config") {
        json c = config;
        c["vocab_size"] = 101;
        const fs::path d = write_checkpoint(tmp, "vocab", c, llama_tensors(s, "F32", false, true));
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()), Contains("model.embed_tokens.weight has shape [100, 64]"));
    }
    SECTION("malformed config.json") {
        const fs::path d = write_checkpoint(tmp, "badjson", config, llama_tensors(s, "F32", false, true));
        write_text(d / "config.json", "{\"model_type\": \"llama\",\n \"x\": }");
        // The stray brace is byte 30 of the file.
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()), Contains("config.json: invalid JSON at byte offset 30"));
    }
    SECTION("a bad safetensors file surfaces the reader's error") {
        const fs::path d = write_checkpoint(tmp, "trunc", config, llama_tensors(s, "F32", false, true));
        fs::resize_file(d / "model.safetensors", 4);
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()),
                          Contains("model.safetensors: header length at byte offset 0"));
    }
    SECTION("no weights") {
        const fs::path d = write_checkpoint(tmp, "noweights", config, {});
        fs::remove(d / "model.safetensors");
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()),
                          Contains("no model.safetensors or model.safetensors.index.json"));
    }
}

TEST_CASE("sharded HF checkpoints: the index and the shards must agree", "[hf]") {
    TempDirs tmp;
    const Shape s{2, 64, 4, 2, 16, 128, 100};
    const json config = {{"model_type", "qwen2"},    {"num_hidden_layers", 2},   {"hidden_size", 64},
                         {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 128},
                         {"vocab_size", 100}};
    const auto tensors = llama_tensors(s, "BF16", true, true);
    const fs::path d = tmp.make("sharded");
    write_text(d / "config.json", config.dump());
    const size_t half = tensors.size() / 2;
    const std::vector<StTensor> a(tensors.begin(), tensors.begin() + half), b(tensors.begin() + half, tensors.end());
    write_bytes(d / "model-00001-of-00002.safetensors", safetensors_bytes(a));
    write_bytes(d / "model-00002-of-00002.safetensors", safetensors_bytes(b));
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    for (const auto& t : a) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
    for (const auto& t : b) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
    auto write_index = [&](const json& j) { write_text(d / "model.safetensors.index.json", j.dump()); };

    SECTION("well-formed") {
        write_index(index);
        const ModelInfo m = load_hf_checkpoint(d.string());
        CHECK(m.tensors.size() == tensors.size());
        CHECK(m.file_size == fs::file_size(d / "model-00001-of-00002.safetensors") +
                                 fs::file_size(d / "model-00002-of-00002.safetensors"));
        CHECK(m.tensors.front().name == "token_embd.weight");
        CHECK(m.tensors.back().name == "output.weight");
    }
    SECTION("missing shard") {
        json j = index;
        j["weight_map"]["model.norm.weight"] = "model-00003-of-00002.safetensors";
        write_index(j);
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()),
                          Contains("model.safetensors.index.json: field 'weight_map.model.norm.weight': shard "
                                   "'model-00003-of-00002.safetensors' does not exist"));
    }
    SECTION("tensor missing from its shard") {
        json j = index;
        j["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
        write_index(j);
        CHECK_THROWS_WITH(
            load_hf_checkpoint(d.string()),
            Contains(
                "'weight_map.model.norm.weight': tensor is missing from shard 'model-00001-of-00002.safetensors'"));
    }
    SECTION("tensor in a shard but not in the index") {
        json j = index;
        j["weight_map"].erase("model.norm.weight");
        write_index(j);
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()),
                          Contains("tensor 'model.norm.weight' is not listed in model.safetensors.index.json"));
    }
    SECTION("shard outside the directory") {
        json j = index;
        j["weight_map"]["model.norm.weight"] = "../model-00002-of-00002.safetensors";
        write_index(j);
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()),
                          Contains("is not a file name inside the checkpoint directory"));
    }
    SECTION("weight_map of the wrong type") {
        write_index({{"weight_map", {1, 2}}});
        CHECK_THROWS_WITH(load_hf_checkpoint(d.string()), Contains("field 'weight_map': expected an object"));
    }
}

TEST_CASE("HF tokenizer facts from tokenizer.model match llama.cpp's llama-spm vocabulary", "[hf]") {
    TempDirs tmp;
    const ModelInfo vocab = load_model(shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
    const Shape s{1, 64, 4, 4, 16, 128, 32000};
    const json config = {{"model_type", "llama"},    {"num_hidden_layers", 1},   {"hidden_size", 64},
                         {"num_attention_heads", 4}, {"intermediate_size", 128}, {"vocab_size", 32000}};
    const fs::path d = write_checkpoint(tmp, "spm", config, llama_tensors(s, "F16", false, false));
    fs::create_symlink(shared_path("models/llama2-tokenizer.model"), d / "tokenizer.model");
    const json tok_config = {
        {"add_bos_token", true},
        {"add_eos_token", false},
        {"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
        {"eos_token", "</s>"},
        {"chat_template", {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}}}};
    write_text(d / "tokenizer_config.json", tok_config.dump());

    const ModelInfo m = load_hf_checkpoint(d.string());
    CHECK(m.tokenizer.kind == vocab.tokenizer.kind);
    CHECK(m.tokenizer.n_vocab == vocab.tokenizer.n_vocab);
    CHECK(m.tokenizer.bos == vocab.tokenizer.bos);
    CHECK(m.tokenizer.eos == vocab.tokenizer.eos);
    CHECK(m.tokenizer.unk == vocab.tokenizer.unk);
    CHECK(m.tokenizer.add_bos == vocab.tokenizer.add_bos);
    REQUIRE(m.chat_template);
    CHECK(*m.chat_template == "D");

    SECTION("a special token missing from the vocabulary is an error") {
        write_text(d / "tokenizer_config.json", json{{"eos_token", "<|eot|>"}}.dump());
        CHECK_THROWS_WITH(
            load_hf_checkpoint(d.string()),
            Contains("tokenizer_config.json: field 'eos_token': token \"<|eot|>\" is not in the vocabulary"));
    }
    SECTION("chat_template.jinja when tokenizer_config.json has none") {
        fs::remove(d / "tokenizer_config.json");
        write_text(d / "chat_template.jinja", "{{ messages }}");
        const ModelInfo m2 = load_hf_checkpoint(d.string());
        CHECK(m2.chat_template == "{{ messages }}");
        CHECK(m2.tokenizer.bos == vocab.tokenizer.bos);  // from tokenizer.model itself
    }
}
