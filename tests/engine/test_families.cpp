// The architecture families (models/family.h): each family file states its facts consistently,
// the GGUF reader takes RoPE style and quirks from it, fused tensors are split exactly, files of an
// unsupported architecture or type fail naming it and what is supported, and --cpu-moe /
// --n-cpu-moe keep a mixture-of-experts model's tokens.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/loader.h"
#include "engine/model.h"
#include "engine/placement.h"
#include "reference_check.h"
#include "models/family.h"
#include "models/model.h"
#include "support/paths.h"

namespace deskside::engine {
namespace {

using models::Family;

bool has(const Family& f, Role r) {
    for (const TensorSpec& t : f.tensors)
        if (t.role == r) return true;
    return false;
}

std::vector<int32_t> greedy_tokens(Model& model, const std::vector<int32_t>& prompt, size_t n) {
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({0, prompt[i], static_cast<int32_t>(i), i + 1 == prompt.size()});
    std::vector<int32_t> out;
    for (size_t k = 0; k < n; ++k) {
        const auto l = model.decode(batch);
        out.push_back(test::argmax(l.data(), model.n_vocab()));
        batch = {{0, out.back(), static_cast<int32_t>(prompt.size() + k), true}};
    }
    return out;
}

std::string path_of(const char* stem) { return test::shared_path(std::string("models/") + stem + ".gguf"); }

}  // namespace

TEST_CASE("every family states its tensors and switches consistently", "[engine][families]") {
    std::set<std::string_view> names;
    for (const Family* f : models::all_families()) {
        INFO(f->name);
        CHECK(names.insert(f->name).second);
        CHECK(&models::family(f->name) == f);
        std::set<std::string_view> tensor_names;
        for (const TensorSpec& t : f->tensors) CHECK(tensor_names.insert(t.name).second);
        CHECK(f->attention_scale != nullptr);
        CHECK(has(*f, Role::TokenEmbd));
        CHECK(has(*f, Role::OutputNorm));
        CHECK(has(*f, Role::AttnNorm));
        CHECK(has(*f, Role::FfnNorm));
        CHECK(has(*f, Role::AttnOutput));
        // Fused tensors replace their parts; a switch and its tensors come together.
        CHECK(f->fused_qkv == has(*f, Role::AttnQkv));
        CHECK(f->fused_qkv != (has(*f, Role::AttnQ) && has(*f, Role::AttnK) && has(*f, Role::AttnV)));
        CHECK(f->moe == has(*f, Role::FfnGateExps));
        if (f->moe) {
            CHECK(has(*f, Role::FfnGateInp));
            CHECK(has(*f, Role::FfnUpExps));
            CHECK(has(*f, Role::FfnDownExps));
            CHECK_FALSE(has(*f, Role::FfnDown));
        } else {
            CHECK(f->fused_gate_up == has(*f, Role::FfnGateUp));
            CHECK(f->fused_gate_up != (has(*f, Role::FfnGate) && has(*f, Role::FfnUp)));
            CHECK(has(*f, Role::FfnDown));
        }
        CHECK(f->long_rope == has(*f, Role::RopeFactorsShort));
        // gpt-oss's activation only exists inside experts.
        if (f->activation == FfnActivation::SwigluOai) CHECK(f->moe);
        // Hugging Face: a family that reads checkpoints names its block's modules.
        CHECK(f->hf_types.empty() == f->hf_block.empty());
    }
}

TEST_CASE("the GGUF reader takes RoPE style and quirks from the family file", "[engine][families]") {
    // llama files store Q/K permuted for adjacent pairs; every other family here rotates halves.
    CHECK_FALSE(models::load_model(path_of("stories260K")).hparams.rope_neox);
    for (const char* stem : {"synth-qwen2", "synth-qwen3-q8_0", "synth-qwen3moe-q8_0", "synth-phi3-q8_0",
                             "synth-gemma3", "synth-gptoss-mxfp4_moe"}) {
        INFO(stem);
        CHECK(models::load_model(path_of(stem)).hparams.rope_neox);
    }
    // gpt-oss files carry a window but no pattern: even layers slide (llama.cpp's default).
    const models::Hparams oss = models::load_model(path_of("synth-gptoss-mxfp4_moe")).hparams;
    CHECK(oss.sliding_window == 16);
    CHECK(oss.layer_is_swa(0));
    CHECK_FALSE(oss.layer_is_swa(1));
    CHECK(oss.n_expert == 8);
    CHECK(oss.n_expert_used == 2);
    CHECK(oss.n_ff_exp == 256);
    // Gemma 3's local RoPE base is not stored in its files.
    CHECK(models::load_model(path_of("synth-gemma3")).hparams.rope_freq_base_swa == 10000.0);
    // LongRoPE's magnitude factor is read from the file.
    CHECK(models::load_model(path_of("synth-phi3-q8_0")).hparams.rope_attn_factor == Approx(1.190238));
}

TEST_CASE("an unsupported architecture or type fails at load naming it and what is supported", "[engine][families]") {
    backends::cpu::CpuBackend backend(1);
    models::ModelInfo info = models::load_model(path_of("stories260K"));
    SECTION("architecture") {
        info.hparams.architecture = "mamba";
        try {
            Model model(info, backend);
            FAIL("a mamba model loaded");
        } catch (const std::runtime_error& e) {
            const std::string what = e.what();
            CHECK_THAT(what, Catch::Contains("unsupported architecture 'mamba'"));
            for (const Family* f : models::all_families()) CHECK_THAT(what, Catch::Contains(std::string(f->name)));
        }
    }
    SECTION("type") {
        for (models::Tensor& t : info.tensors)
            if (t.name == "blk.0.attn_q.weight") t.type = quant::TypeId::I8;  // a GGUF type nothing computes with
        try {
            Model model(info, backend);
            FAIL("an i8 matrix loaded");
        } catch (const std::runtime_error& e) {
            const std::string what = e.what();
            CHECK_THAT(what, Catch::Contains("tensor 'blk.0.attn_q.weight' is i8"));
            CHECK_THAT(what, Catch::Contains("has no matmul for i8"));
            CHECK_THAT(what, Catch::Contains("q4_K"));  // the list of what the device computes
        }
    }
}

TEST_CASE("Phi-3's fused QKV and gate+up are split exactly", "[engine][families]") {
    // The same weights described as separate Q/K/V and gate/up tensors of a llama-block model
    // (with the file's NEOX RoPE, LongRoPE short factors as rope_freqs and attn_factor kept)
    // give the fused model's logits bit for bit: splitting rows does not change a row's dot.
    const models::ModelInfo fused = models::load_model(path_of("synth-phi3-q8_0"));
    models::ModelInfo split = fused;
    split.hparams.architecture = "llama";
    const models::Hparams& hp = fused.hparams;
    const int64_t q_rows = hp.n_head * hp.head_dim, kv_rows = hp.n_head_kv * hp.head_dim;
    std::vector<models::Tensor> tensors;
    for (const models::Tensor& t : fused.tensors) {
        const auto part = [&](const std::string& name, int64_t first_row, int64_t rows) {
            models::Tensor p = t;
            const size_t row_bytes = quant::row_bytes(t.type, t.shape[0]);
            p.name = name;
            p.shape = {t.shape[0], rows};
            p.data = t.data + row_bytes * first_row;
            p.n_bytes = row_bytes * rows;
            tensors.push_back(p);
        };
        const std::string blk = t.name.substr(0, t.name.find('.', 4) + 1);
        if (t.name.ends_with("attn_qkv.weight")) {
            part(blk + "attn_q.weight", 0, q_rows);
            part(blk + "attn_k.weight", q_rows, kv_rows);
            part(blk + "attn_v.weight", q_rows + kv_rows, kv_rows);
        } else if (t.name.ends_with("ffn_up.weight")) {
            part(blk + "ffn_gate.weight", 0, hp.n_ff);
            part(blk + "ffn_up.weight", hp.n_ff, hp.n_ff);
        } else if (t.name == "rope_factors_short.weight") {
            models::Tensor f = t;
            f.name = "rope_freqs.weight";
            tensors.push_back(f);
        } else if (t.name != "rope_factors_long.weight") {
            tensors.push_back(t);
        }
    }
    split.tensors = tensors;
    backends::cpu::CpuBackend backend(2);
    EngineOptions opt;
    opt.cache.n_positions = 512;  // below original_context_length 4096: the short factors
    Model a(fused, backend, opt), b(split, backend, opt);
    const std::vector<int32_t> prompt{1, 403, 407, 261, 378, 432, 383, 286};
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({0, prompt[i], static_cast<int32_t>(i), true});
    const auto la = a.decode(batch);
    const std::vector<float> fused_logits(la.begin(), la.end());
    const auto lb = b.decode(batch);
    CHECK(std::vector<float>(lb.begin(), lb.end()) == fused_logits);
}

TEST_CASE("expert offload (--cpu-moe, --n-cpu-moe) keeps the experts in host memory and the tokens of an all-CPU run",
          "[engine][families][moe]") {
    const std::string path = path_of("synth-qwen3moe-q4_k_m");
    const std::vector<int32_t> prompt{1, 403, 407, 261, 378};
    constexpr size_t kTokens = 24;
    EngineOptions opt;
    opt.cache.n_positions = 256;
    DeviceRequest cpu;
    const std::vector<int32_t> want = greedy_tokens(*load_model(models::open_model_file(path), cpu, opt).model, prompt, kTokens);

    // The plan: experts of offloaded layers leave the GPU's weights and appear in host memory.
    const models::ModelInfo info = models::load_model(path);
    const MemoryNeeds needs = memory_needs(info, opt.cache, opt.n_batch);
    const std::vector<PlanDevice> gpu{{"vulkan0", 1ull << 40}};
    const Plan all_on_gpu = plan_placement(needs, gpu, {});
    const Plan two_off = plan_placement(needs, gpu, {}, {2, {"cpu", 1ull << 40}});
    const Plan one_off = plan_placement(needs, gpu, {}, {1, {"cpu", 1ull << 40}});
    REQUIRE(two_off.host_experts);
    CHECK(all_on_gpu.devices[0].expert_bytes == needs.layer_experts[0] + needs.layer_experts[1]);
    CHECK(two_off.devices[0].expert_bytes == 0);
    CHECK(two_off.host_experts->expert_bytes == needs.layer_experts[0] + needs.layer_experts[1]);
    CHECK(two_off.devices[0].weight_bytes + two_off.host_experts->weight_bytes == all_on_gpu.devices[0].weight_bytes);
    CHECK(one_off.host_experts->layer_end == 1);
    CHECK(one_off.devices[0].expert_bytes == needs.layer_experts[1]);
    CHECK(needs.layer_experts[0] > 0);

    if (!test::device_or_skip("vulkan0", "--cpu-moe with vulkan0 as the GPU")) return;
    for (const int64_t layers : {kAllExpertLayers, int64_t{2}, int64_t{1}}) {
        INFO("experts of " << (layers == kAllExpertLayers ? std::string("all") : std::to_string(layers)) << " layers on the CPU");
        DeviceRequest r;
        r.names = {"vulkan0"};
        r.cpu_moe_layers = layers;
        LoadedModel m = load_model(models::open_model_file(path), r, opt);
        REQUIRE(m.plan.host_experts);
        CHECK(m.plan.host_experts->layer_end == std::min<int64_t>(layers, 2));
        CHECK(greedy_tokens(*m.model, prompt, kTokens) == want);
    }
    DeviceRequest dense;
    dense.names = {"vulkan0"};
    dense.cpu_moe_layers = kAllExpertLayers;
    CHECK_THROWS_WITH(load_model(models::open_model_file(path_of("synth-qwen3-q8_0")), dense, opt),
                      Catch::Contains("is not a mixture-of-experts model"));
}

}  // namespace deskside::engine
