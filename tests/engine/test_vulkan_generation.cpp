// Greedy generation on Vulkan devices gives the CPU backend's tokens (issue #5's acceptance):
// on vulkan0, on two logical Vulkan devices split 1,1 and 3,1, and on vulkan0 + cpu; and the
// real Gemma 3 270M's first 32 greedy tokens on vulkan0. One physical device is exposed as two
// logical ones (vulkan0, vulkan1) with DESKSIDE_VULKAN_SPLIT=2 (backends/devices.h), so the
// Vulkan splits run on any machine with one Vulkan device; without one, the tests are skipped
// with a warning. Only stories260K runs by default (CI time); the others are hidden tags.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/dot_kernels.h"
#include "backends/devices.h"
#include "models/tokenizer/tokenizer.h"
#include "reference_check.h"
#include "support/required.h"
#include "support/scoped_env.h"

namespace deskside::engine {
namespace {

using test::Placement;

const Placement kVulkanPlacements[] = {
    {{"vulkan0"}, ""},
    {{"vulkan0", "vulkan1"}, "1,1"},
    {{"vulkan0", "vulkan1"}, "3,1"},
    {{"vulkan0", "cpu"}, "1,1"},
};

void check_like_cpu(const std::string& stem, size_t n_cases = SIZE_MAX) { test::check_like_cpu(stem, kVulkanPlacements, n_cases); }

// The quantized models agree only where vulkan0 gives the CPU's bits: the exact shader variants
// (shaderFloat64) against the CPU's AVX2 level (docs/VULKAN.md, "Bit-exact ops"); elsewhere
// these checks are skipped with a warning, not failed.
bool exact_or_skip() {
    if (backends::cpu::selected_isa() != backends::cpu::CpuIsa::Avx2) {
        WARN("SKIPPED: the CPU backend runs at the " << backends::cpu::isa_name(backends::cpu::selected_isa())
                                                    << " level; vulkan0 reproduces the AVX2 level (DESKSIDE_CPU_ISA=avx2)");
        return false;
    }
    for (const backends::DeviceInfo& d : backends::list_devices()) {
        if (d.name != "vulkan0") continue;
        if (std::find(d.features.begin(), d.features.end(), "fp64") != d.features.end()) return true;
    }
    WARN("SKIPPED: vulkan0 has no shaderFloat64, so its arithmetic is not the CPU's bit for bit");
    return false;
}

bool vulkan_split_or_skip() {
    return test::device_or_skip("vulkan0", "the Vulkan generation tests") &&
           test::device_or_skip("vulkan1", "the Vulkan generation tests");
}

}  // namespace

TEST_CASE("greedy tokens on vulkan0, vulkan0+vulkan1 (1,1 and 3,1) and vulkan0+cpu equal the CPU's: stories260K",
          "[engine][split][vulkan]") {
    const test::ScopedEnv split_env("DESKSIDE_VULKAN_SPLIT", "2");
    if (!vulkan_split_or_skip()) return;
    check_like_cpu("stories260K", 2);  // two of the five prompts: CI time
}

// The rest (hidden for CI time, `deskside_tests "[vulkan-generation]"`). The quantized files
// amplify rounding differences (a few ulps become whole Q8 activation levels; docs/VULKAN.md,
// "Bit-exact ops"): they agree because vulkan0 reproduces the CPU's arithmetic op by op on a
// device with shaderFloat64 (at the CPU's AVX2 level), and only there.
TEST_CASE("greedy tokens on Vulkan placements equal the CPU's: every stories260K file", "[engine][.vulkan-generation]") {
    const test::ScopedEnv split_env("DESKSIDE_VULKAN_SPLIT", "2");
    if (!vulkan_split_or_skip() || !exact_or_skip()) return;
    for (const char* stem : {"stories260K", "stories260K-f16", "stories260K-bf16", "stories260K-q8_0", "stories260K-q4_0",
                             "stories260K-q4_1", "stories260K-q5_0", "stories260K-q5_1"})
        check_like_cpu(stem);
}

TEST_CASE("greedy tokens on Vulkan placements equal the CPU's: synth-k", "[engine][.vulkan-generation]") {
    const test::ScopedEnv split_env("DESKSIDE_VULKAN_SPLIT", "2");
    if (!vulkan_split_or_skip() || !exact_or_skip()) return;
    for (const char* stem : {"synth-k", "synth-k-q2_k", "synth-k-q3_k_m", "synth-k-q4_k_s", "synth-k-q4_k_m", "synth-k-q5_k_m",
                             "synth-k-q6_k", "synth-k-q8_0", "synth-k-iq4_nl", "synth-k-iq4_xs"})
        check_like_cpu(stem);
}

namespace {

struct GreedyTrace {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> rows;  // the logits each token was picked from
};

GreedyTrace greedy_trace(Model& model, const std::vector<int32_t>& prompt, size_t n) {
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({0, prompt[i], static_cast<int32_t>(i), i + 1 == prompt.size()});
    std::span<const float> logits = model.decode(batch);
    GreedyTrace t;
    while (t.tokens.size() < n) {
        t.rows.emplace_back(logits.begin(), logits.end());
        t.tokens.push_back(test::argmax(logits.data(), model.n_vocab()));
        const BatchToken next{0, t.tokens.back(), static_cast<int32_t>(model.length(0)), true};
        logits = model.decode(std::span(&next, 1));
    }
    return t;
}

// "id=logit" for the k largest logits of a row.
std::string top_logits(const std::vector<float>& row, size_t k) {
    std::vector<int32_t> ids(row.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    std::ostringstream out;
    for (size_t i = 0; i < k; ++i) out << (i ? " " : "") << ids[i] << "=" << row[ids[i]];
    return out.str();
}

}  // namespace

TEST_CASE("gemma3-270m generates the CPU's first 32 greedy tokens on vulkan0", "[engine][.vulkan-gemma3]") {
    const std::string path = test::gemma3_270m_path();
    if (!test::model_or_skip(path, "the Gemma 3 270M Vulkan test", test::kFetchGemma)) return;
    if (!test::device_or_skip("vulkan0", "the Gemma 3 270M Vulkan test") || !exact_or_skip()) return;
    constexpr size_t kTokens = 32;
    const std::unique_ptr<models::Tokenizer> tokenizer = models::Tokenizer::load(path);
    test::DeviceModel cpu = test::open_model(path, {"cpu"});
    test::DeviceModel vk = test::open_model(path, {"vulkan0"});
    for (const char* text : {"The capital of France is", "Once upon a time, in a small village by the sea,"}) {
        const std::vector<int32_t> prompt = tokenizer->encode(text, true, false);
        const GreedyTrace a = greedy_trace(*cpu.model, prompt, kTokens);
        const GreedyTrace b = greedy_trace(*vk.model, prompt, kTokens);
        cpu.model->truncate(0, 0);
        vk.model->truncate(0, 0);
        const size_t diverge = std::mismatch(a.tokens.begin(), a.tokens.end(), b.tokens.begin()).first - a.tokens.begin();
        std::ostringstream detail;
        detail << "prompt \"" << text << "\": cpu \"" << tokenizer->decode(a.tokens) << "\", vulkan0 \""
               << tokenizer->decode(b.tokens) << "\"";
        if (diverge < kTokens)
            detail << "; first difference at token " << diverge << ": cpu top-5 " << top_logits(a.rows[diverge], 5)
                   << ", vulkan0 top-5 " << top_logits(b.rows[diverge], 5);
        INFO(detail.str());
        CHECK(diverge == kTokens);
    }
}

}  // namespace deskside::engine
