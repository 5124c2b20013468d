// The engine-level checks on CUDA (hidden tags, run by scripts/gpu-check.sh on a GPU machine):
// the reference checks of every reference file on cuda0, held to the bar the CPU meets (llama.cpp's
// own spread, reference_check.h), and greedy tokens on cuda0, on two
// logical CUDA devices (DESKSIDE_CUDA_SPLIT=2) and on cuda0 + cpu equal to the CPU's. Where no
// CUDA device exists they are skipped with a warning (a failure with DESKSIDE_REQUIRE_DEVICES).
#include <catch2/catch.hpp>
#include <string>

#include "reference_check.h"
#include "support/scoped_env.h"

namespace deskside::engine {
namespace {

const test::Placement kCudaPlacements[] = {
    {{"cuda0"}, ""},
    {{"cuda0", "cuda1"}, "1,1"},
    {{"cuda0", "cpu"}, "1,1"},
};

}  // namespace

TEST_CASE("cuda0: every reference file is as close to llama.cpp as its own builds", "[engine][.cuda-reference]") {
    if (!test::device_or_skip("cuda0", "the CUDA reference-logit checks")) return;
    for (const char* stem : test::kReferenceFiles) {
        if (!test::present_or_warn(stem)) continue;
        try {
            test::check_reference(stem, {"cuda0"});
        } catch (const std::exception& e) {
            FAIL_CHECK(stem << " on cuda0: " << e.what());
        }
    }
}

TEST_CASE("greedy tokens on cuda0, cuda0+cuda1 and cuda0+cpu equal the CPU's: stories260K and synth-k",
          "[engine][.cuda-generation]") {
    const test::ScopedEnv split_env("DESKSIDE_CUDA_SPLIT", "2");
    if (!test::device_or_skip("cuda0", "the CUDA generation tests") ||
        !test::device_or_skip("cuda1", "the CUDA generation tests"))
        return;
    for (const char* stem : {"stories260K", "stories260K-q8_0", "stories260K-q4_0", "synth-k", "synth-k-q4_k_m",
                             "synth-k-q8_0", "synth-k-q6_k"})
        if (test::present_or_warn(stem)) test::check_like_cpu(stem, kCudaPlacements);
}

}  // namespace deskside::engine
