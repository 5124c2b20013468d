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
using test::measured;
using test::shared_path;
using test::Tolerance;

// The CPU backend, opened as `--devices cpu` opens it.
void check_model(const std::string& stem, Tolerance tol, const EngineOptions& options = {}) {
    test::check_reference(stem, {"cpu"}, tol, options);
}

// Issue #7's acceptance: 2e-2 for quantized weights (and 1e-3 for float ones, which no float
// model meets yet).
constexpr double kQuantAcceptance = 2e-2;
constexpr Tolerance kQuantAccepted{kQuantAcceptance, kQuantAcceptance};

// The worst quantized-weights deviation below, rounded up.
constexpr Tolerance kQuantNoise{1.5, 0.4};

}  // namespace

// Models that do not meet the acceptance yet get measured(): 1.3x what was measured (docs/ENGINE.md,
// "Matching llama.cpp's logits", has the numbers and the method). Why they miss, measured with
// llama.cpp itself built on this AVX2 machine (scripts/peer/): the reference was made on an
// AVX-512 machine, and llama.cpp there sums the F32/F16/BF16 matmuls in 16 lanes, takes
// llamafile's sgemm for prompt batches but its vec_dot for single tokens (so its numbers
// depend on the batch size, which ours must not), and repacks Q4_0/Q4_K/IQ4_NL weights into
// interleaved kernels with their own order. llama.cpp on this machine misses the reference by
// the same amounts (stories260K F32 0.014, BF16 0.077, Q4_0 0.29, gemma3 Q6_K 0.40). Where it
// reproduces the reference (Q5_0, Q8_0 on stories260K), so do we, bit for bit or to 7e-3.
// A wrong RoPE, norm or scale moves logits by several units on every row and fails all three
// checks (bound, mean, argmax where the reference's top-2 gap exceeds the bound).
TEST_CASE("stories260K float weights match llama.cpp logits", "[engine]") {
    check_model("stories260K", measured(0.0313, 0.0021));
    check_model("stories260K-f16", measured(0.0281, 0.0079));
    check_model("stories260K-bf16", measured(0.0769, 0.0229));
}

TEST_CASE("stories260K quantized weights match llama.cpp logits", "[engine]") {
    // Met: llama.cpp computes these the same way on both machines, and so do we (Q5_0 is
    // bit-identical; Q8_0 differs on one row, by 0.0074, as llama.cpp on this machine does).
    check_model("stories260K-q5_0", kQuantAccepted);
    check_model("stories260K-q8_0", kQuantAccepted);
    check_model("stories260K-q4_0", measured(0.298, 0.0445));
    check_model("stories260K-q4_1", measured(0.202, 0.0036));
    check_model("stories260K-q5_1", measured(0.274, 0.067));
}

TEST_CASE("synth-k (llama, GQA) matches llama.cpp logits", "[engine]") {
    check_model("synth-k", measured(0.0073, 0.0035));
    check_model("synth-k-q2_k", measured(0.414, 0.169));
    check_model("synth-k-q3_k_m", measured(0.400, 0.148));
    check_model("synth-k-q4_k_s", measured(0.339, 0.154));
    check_model("synth-k-q4_k_m", measured(0.371, 0.157));
    check_model("synth-k-q5_k_m", measured(0.293, 0.077));
    check_model("synth-k-q6_k", measured(0.280, 0.097));
    check_model("synth-k-q8_0", measured(0.166, 0.0115));
    check_model("synth-k-iq4_nl", measured(0.218, 0.077));
    check_model("synth-k-iq4_xs", measured(0.371, 0.238));
}

TEST_CASE("synth-qwen2 matches llama.cpp logits", "[engine]") {
    check_model("synth-qwen2", measured(0.0164, 0.0074));
    check_model("synth-qwen2-q8_0", measured(0.313, 0.077));
    check_model("synth-qwen2-q4_k_m", measured(0.949, 0.337));
    check_model("synth-qwen2-q6_k", measured(1.122, 0.311));
}

TEST_CASE("synth-gemma3 matches llama.cpp logits", "[engine]") {
    check_model("synth-gemma3", measured(0.0129, 0.0077));
    check_model("synth-gemma3-q8_0", measured(0.207, 0.039));
    check_model("synth-gemma3-q4_k_m", measured(0.416, 0.277));
    check_model("synth-gemma3-q6_k", measured(0.478, 0.256));
}

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
