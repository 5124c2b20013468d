// The reference checks of test_reference_logits.cpp on vulkan0: every model in
// ../shared/reference, teacher-forced through the engine on the Vulkan backend (lavapipe in test
// runs), each row's logits against llama.cpp's. Skipped with a warning where no Vulkan device
// exists.
//
// Only the first case runs by default (CI time: each model costs ~20 s of lavapipe shader time in
// a Release build, 97% of it inside the JIT-compiled shaders); the whole set is hidden behind
// [vulkan-reference]: `deskside_tests "[vulkan-reference]"`. Measured numbers: docs/VULKAN.md,
// "Agreement with llama.cpp".
#include <catch2/catch.hpp>
#include <string>

#include "reference_check.h"

namespace deskside::engine {
namespace {

using test::measured;
using test::Tolerance;

// Issue #5's 1e-3 (float) / 2e-2 (quantized) is met by no model on vulkan0, as by none but
// stories260K Q5_0/Q8_0 on the CPU (test_reference_logits.cpp says why llama.cpp itself misses
// it on this machine). Bounds are measured() on vulkan0 where measured with the 12:45 int8-dot
// matmul; the others carry the CPU backend's bounds: the Vulkan backend now quantizes
// activations like the CPU, so it must be at least as close to llama.cpp.

bool vulkan_or_skip() { return test::device_or_skip("vulkan0", "the Vulkan reference-logit checks"); }

void check_vulkan(const std::string& stem, Tolerance tol) { test::check_reference(stem, {"vulkan0"}, tol); }

}  // namespace

TEST_CASE("vulkan0: stories260K matches llama.cpp logits", "[engine][vulkan]") {
    if (!vulkan_or_skip()) return;
    check_vulkan("stories260K", measured(0.0322, 0.00317));
}

TEST_CASE("vulkan0: stories260K float weights match llama.cpp logits", "[engine][.vulkan-reference]") {
    if (!vulkan_or_skip()) return;
    check_vulkan("stories260K-f16", measured(0.0299, 0.0111));
    check_vulkan("stories260K-bf16", measured(0.0825, 0.0441));
}

TEST_CASE("vulkan0: stories260K quantized weights match llama.cpp logits", "[engine][.vulkan-reference]") {
    if (!vulkan_or_skip()) return;
    // NOT explained yet, and no bound of ours: every stories260K quantized file is 0.38-0.42 /
    // 0.19 from llama.cpp on vulkan0 while the CPU is 0.0074-0.30; vulkan0 differs from our CPU
    // by 0.39 already at the first token of layer 0 (single matmuls, get_rows agree within 1e-6).
    // The CPU's bounds stay, so these fail until it is found (/work/notes/vkaccept-to-vkfast.md).
    check_vulkan("stories260K-q8_0", {2e-2, 2e-2});
    check_vulkan("stories260K-q5_0", {2e-2, 2e-2});
    check_vulkan("stories260K-q4_0", measured(0.298, 0.0445));
    check_vulkan("stories260K-q4_1", measured(0.202, 0.0036));
    check_vulkan("stories260K-q5_1", measured(0.274, 0.067));
}

TEST_CASE("vulkan0: synth-k (llama, GQA, every K-quant) matches llama.cpp logits", "[engine][.vulkan-reference]") {
    if (!vulkan_or_skip()) return;
    check_vulkan("synth-k", measured(0.00758, 0.00370));
    check_vulkan("synth-k-q2_k", measured(0.303, 0.127));
    check_vulkan("synth-k-q3_k_m", measured(0.323, 0.107));
    check_vulkan("synth-k-q4_k_s", measured(0.356, 0.138));
    check_vulkan("synth-k-q4_k_m", measured(0.371, 0.157));
    check_vulkan("synth-k-q5_k_m", measured(0.293, 0.077));
    check_vulkan("synth-k-q6_k", measured(0.280, 0.097));
    check_vulkan("synth-k-q8_0", measured(0.166, 0.0115));
    check_vulkan("synth-k-iq4_nl", measured(0.218, 0.077));
    check_vulkan("synth-k-iq4_xs", measured(0.371, 0.238));
}

TEST_CASE("vulkan0: synth-qwen2 matches llama.cpp logits", "[engine][.vulkan-reference]") {
    if (!vulkan_or_skip()) return;
    check_vulkan("synth-qwen2", measured(0.0164, 0.0074));
    check_vulkan("synth-qwen2-q8_0", measured(0.313, 0.077));
    check_vulkan("synth-qwen2-q4_k_m", measured(0.949, 0.337));
    check_vulkan("synth-qwen2-q6_k", measured(1.122, 0.311));
}

TEST_CASE("vulkan0: synth-gemma3 matches llama.cpp logits", "[engine][.vulkan-reference]") {
    if (!vulkan_or_skip()) return;
    check_vulkan("synth-gemma3", measured(0.0129, 0.0077));
    check_vulkan("synth-gemma3-q8_0", measured(0.207, 0.039));
    check_vulkan("synth-gemma3-q4_k_m", measured(0.416, 0.277));
    check_vulkan("synth-gemma3-q6_k", measured(0.478, 0.256));
}

}  // namespace deskside::engine
