// The reference checks of test_reference_logits.cpp on vulkan0: every reference file,
// teacher-forced and free-running through the engine on the Vulkan backend (lavapipe in test
// runs), judged by the same bar as the CPU (llama.cpp's own spread, reference_check.h), with the
// `_exact` shader variants and with the plain ones. Skipped with a warning where no Vulkan device
// exists (a failure with DESKSIDE_REQUIRE_DEVICES).
//
// Only stories260K runs by default (CI time: each model costs ~20 s of lavapipe shader time in a
// Release build, 97% of it inside the JIT-compiled shaders); every file is hidden behind
// [vulkan-reference]: `deskside_tests "[vulkan-reference]"`. Measured numbers: docs/ENGINE.md,
// "Matching llama.cpp's logits".
#include <catch2/catch.hpp>
#include <iostream>
#include <string>

#include "reference_check.h"

namespace deskside::engine {

TEST_CASE("vulkan0: stories260K is as close to llama.cpp as its own builds, both shader variants",
          "[engine][vulkan][reference]") {
    for (const test::VulkanVariant& v : test::kVulkanVariants)
        test::with_vulkan_variant(v, [] { test::check_reference("stories260K", {"vulkan0"}); });
}

// One file per new family's distinctive ops, in every run: gpt-oss's sinks, alternating sliding
// window, biased experts with the clamped SwiGLU and MXFP4 weights; Qwen3-MoE's softmax-then-top-k
// router; Phi-3's fused tensors and LongRoPE. `_exact` variants (lavapipe's default).
TEST_CASE("vulkan0: one file of each new family is as close to llama.cpp as on the CPU",
          "[engine][vulkan][reference]") {
    test::with_vulkan_variant(test::kVulkanVariants[0], [] {
        for (const char* stem : {"synth-gptoss-mxfp4_moe", "synth-qwen3moe-q8_0", "synth-phi3-q4_k_m"})
            test::check_reference(stem, {"vulkan0"});
    });
}

TEST_CASE("vulkan0 exact variants: every reference file is as close to llama.cpp as its own builds",
          "[engine][.vulkan-reference]") {
    test::with_vulkan_variant(test::kVulkanVariants[0], [] { test::check_reference_files({"vulkan0"}); });
}

TEST_CASE("vulkan0 plain variants: every reference file is as close to llama.cpp as its own builds",
          "[engine][.vulkan-reference]") {
    test::with_vulkan_variant(test::kVulkanVariants[1], [] { test::check_reference_files({"vulkan0"}); });
}

// `deskside_tests "[vulkan-closeness-table]"` prints vulkan0's rows of the closeness table.
TEST_CASE("closeness table: every reference file on vulkan0", "[engine][.vulkan-closeness-table]") {
    for (const test::VulkanVariant& v : test::kVulkanVariants) {
        const std::string where = std::string("vulkan0 ") + v.label;
        test::with_vulkan_variant(v, [&where] { test::print_closeness_rows({"vulkan0"}, where); });
    }
}

}  // namespace deskside::engine
