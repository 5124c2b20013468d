// The quantization plan against files llama-quantize made, for architectures whose F32 source is
// not stored (MoE with 8 experts, fused attn_qkv, Gemma 3, gpt-oss): planning the mix from the
// tensor list alone must give each tensor the type, and the order, of llama-quantize's file. Also
// GgufWriter's streaming mode and quantize_in_memory against quantize_file.
// (tests/py/test_quantize.py compares whole files with llama-quantize's.)
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/model.h"
#include "models/quant_mix.h"
#include "models/quantize.h"
#include "support/paths.h"
#include "support/required.h"

namespace {

using namespace deskside;
using models::GgufFile;
using quant::TypeId;

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::filesystem::path scratch_dir(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() / ("deskside-quantize-" + name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

}  // namespace

TEST_CASE("the mix plan gives the types and order of llama-quantize's files", "[quantize]") {
    const auto [file, mix_name] = GENERATE(table<std::string, std::string>({
        {"synth-qwen3moe-q4_k_m.gguf", "Q4_K_M"},
        {"synth-qwen3moe-q8_0.gguf", "Q8_0"},
        {"synth-phi3-q4_k_m.gguf", "Q4_K_M"},
        {"synth-phi3-q8_0.gguf", "Q8_0"},
        {"synth-gptoss-q4_k_m.gguf", "Q4_K_M"},
        {"synth-gemma3-q4_k_m.gguf", "Q4_K_M"},
        {"synth-gemma3-q6_k.gguf", "Q6_K"},
        {"synth-qwen2-q4_k_m.gguf", "Q4_K_M"},
        {"synth-qwen3-q4_k_m.gguf", "Q4_K_M"},
    }));
    const std::string path = test::shared_path("models/" + file);
    if (!test::model_or_skip(path, "the mix plan test", "the shared model files")) return;
    INFO(file);
    const models::ModelInfo m = models::load_model(path);
    // The files were quantized from all-F32 sources.
    std::vector<models::MixTensor> tensors;
    for (const models::Tensor& t : m.tensors) tensors.push_back({t.name, TypeId::F32, t.shape});
    const models::Hparams& hp = m.hparams;
    const models::MixModel model{hp.architecture, hp.n_layer, hp.n_head, hp.n_head_kv, hp.n_expert};
    const auto plan = models::plan_quant_mix(*models::find_quant_mix(mix_name), model, tensors, false);
    REQUIRE(plan.size() == m.tensors.size());
    for (size_t i = 0; i < plan.size(); ++i) {
        INFO(m.tensors[i].name);
        CHECK(tensors[plan[i].source].name == m.tensors[i].name);
        CHECK(quant::type_info(plan[i].type).name == quant::type_info(m.tensors[i].type).name);
    }
}

TEST_CASE("mix names are llama-quantize's, case-insensitive, aliases included", "[quantize]") {
    REQUIRE(models::find_quant_mix("q4_k_m") != nullptr);
    CHECK(models::find_quant_mix("q4_k_m")->file_type == 15);
    CHECK(models::find_quant_mix("Q4_K")->file_type == 15);
    CHECK(models::find_quant_mix("bf16")->file_type == 32);
    CHECK(models::find_quant_mix("Q4_K_X") == nullptr);
    CHECK(models::quant_mix_names().find("IQ4_XS") != std::string::npos);
}

TEST_CASE("a streamed GGUF equals the one written from memory; an unfinished one leaves nothing", "[quantize]") {
    const auto dir = scratch_dir("stream");
    const std::vector<uint8_t> a(64 * 4, 1), b(34 * 2, 2);
    models::GgufWriter whole, streamed;
    for (models::GgufWriter* w : {&whole, &streamed}) {
        w->set("general.architecture", models::GgufValue::string("llama"));
    }
    whole.add_tensor("a", TypeId::F32, {64}, a);
    whole.add_tensor("b", TypeId::Q8_0, {32, 2}, b);
    streamed.add_tensor("a", TypeId::F32, {64});
    streamed.add_tensor("b", TypeId::Q8_0, {32, 2});
    {
        auto s = streamed.begin((dir / "s.gguf").string());
        s.append(a);
        s.append(b);
        s.commit();
    }
    CHECK(read_bytes((dir / "s.gguf").string()) == whole.to_bytes());
    CHECK_THROWS_AS(streamed.to_bytes(), models::GgufError);

    {
        auto s = streamed.begin((dir / "t.gguf").string());
        s.append(a);
        CHECK(std::filesystem::exists(dir / "t.gguf.part"));
        CHECK_THROWS_WITH(s.commit(), Catch::Contains("tensor 'b' was never appended"));
    }
    {
        auto s = streamed.begin((dir / "u.gguf").string());
        CHECK_THROWS_WITH(s.append(b), Catch::Contains("68 bytes given, 256 expected"));
    }
    CHECK(!std::filesystem::exists(dir / "t.gguf"));
    CHECK(!std::filesystem::exists(dir / "u.gguf"));
    // s.gguf alone
    CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 1);
    std::filesystem::remove_all(dir);
}

TEST_CASE("quantize_in_memory gives the tensors quantize_file writes", "[quantize]") {
    const std::string src = test::shared_path("models/synth-k.gguf");
    if (!test::model_or_skip(src, "quantize_in_memory", "the shared model files")) return;
    const auto dir = scratch_dir("memory");
    models::QuantizeSpec spec;
    spec.type = "Q4_K_M";
    spec.threads = 3;  // rows split unevenly across threads
    models::quantize_file(src, (dir / "q.gguf").string(), spec);
    const GgufFile file = GgufFile::open((dir / "q.gguf").string());
    const models::ModelInfo mem = models::quantize_in_memory(models::load_model(src), spec);
    REQUIRE(mem.tensors.size() == file.tensors().size());
    for (size_t i = 0; i < mem.tensors.size(); ++i) {
        const auto& t = file.tensors()[i];
        INFO(t.name);
        REQUIRE(mem.tensors[i].name == t.name);
        CHECK(mem.tensors[i].type == t.type);
        REQUIRE(mem.tensors[i].n_bytes == t.n_bytes);
        CHECK(std::equal(t.data, t.data + t.n_bytes, mem.tensors[i].data));
    }
    std::filesystem::remove_all(dir);
}
