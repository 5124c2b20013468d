// The forward pass against llama.cpp's logits on the same files (teacher-forced: the prompt
// plus the reference's greedy tokens in one batch, every position compared), and free-running
// greedy generation against llama.cpp's tokens.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/model.h"
#include "models/model.h"
#include "reference_check.h"

namespace deskside::engine {
namespace {

using test::load_reference;
using test::shared_path;
using test::Tolerance;

// The CPU backend, opened as `--devices cpu` opens it.
void check_model(const std::string& stem, Tolerance tol, const EngineOptions& options = {}) {
    test::check_reference(stem, {"cpu"}, tol, options);
}

// Every CPU bound of `family` (reference_check.h's table).
void check_family(test::ReferenceFamily family) {
    for (const test::ReferenceModel& m : test::kReferenceModels)
        if (m.family == family) check_model(m.stem, m.cpu);
}

// The worst quantized-weights deviation in the table, rounded up.
constexpr Tolerance kQuantNoise{1.5, 0.4};

}  // namespace

// Bounds and the reasons for them: reference_check.h, kReferenceModels. A wrong RoPE, norm or
// scale moves logits by several units on every row and fails all three checks (bound, mean,
// argmax where the reference's top-2 gap exceeds the bound).
TEST_CASE("stories260K float weights match llama.cpp logits", "[engine]") { check_family(test::ReferenceFamily::StoriesFloat); }

TEST_CASE("stories260K quantized weights match llama.cpp logits", "[engine]") { check_family(test::ReferenceFamily::StoriesQuant); }

TEST_CASE("synth-k (llama, GQA) matches llama.cpp logits", "[engine]") { check_family(test::ReferenceFamily::SynthK); }

TEST_CASE("synth-qwen2 matches llama.cpp logits", "[engine]") { check_family(test::ReferenceFamily::SynthQwen2); }

TEST_CASE("synth-gemma3 matches llama.cpp logits", "[engine]") { check_family(test::ReferenceFamily::SynthGemma3); }

TEST_CASE("a Q8_0 KV cache stays close to llama.cpp's F16-cache logits", "[engine]") {
    // The reference was computed with an F16 cache; Q8_0 K and V add quantization noise of the
    // size quantized weights do (the bound is the worst quantized-weights deviation above).
    EngineOptions opt;
    opt.cache.type_k = quant::TypeId::Q8_0;
    opt.cache.type_v = quant::TypeId::Q8_0;
    check_model("synth-k", kQuantNoise, opt);
    // stories260K's heads (8 values) cannot be cut into Q8_0 blocks of 32: a clear error.
    backends::cpu::CpuBackend backend(1);
    CHECK_THROWS_WITH(Model(models::load_model(shared_path("models/stories260K.gguf")), backend, opt),
                      Catch::Contains("multiples of 32"));
}

TEST_CASE("stories260K free-running greedy generation reproduces llama.cpp's tokens", "[engine]") {
    const test::ReferenceRun ref = load_reference("stories260K");
    test::DeviceModel m = test::open_model(shared_path("models/stories260K.gguf"), {"cpu"});
    for (size_t c = 0; c < ref.cases.size(); ++c) {
        const test::ReferenceCase& rc = ref.cases[c];
        INFO("prompt " << c);
        CHECK(test::greedy(*m.model, static_cast<int32_t>(c), rc.prompt_tokens, rc.greedy_tokens.size()) == rc.greedy_tokens);
    }
}

}  // namespace deskside::engine
