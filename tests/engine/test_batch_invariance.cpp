// DESIGN.md key decision 5: a sequence's logits do not depend on which other sequences share
// its batch, nor on how its prompt is split into steps; and the paged KV cache shares prefixes.
#include <catch2/catch.hpp>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/model.h"
#include "models/model.h"
#include "support/paths.h"

namespace deskside::engine {
namespace {

// The first prompts of the stories reference run (token ids of llama.cpp's tokenizer).
const std::vector<int32_t> kPromptA{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401};
const std::vector<int32_t> kPromptB{1, 291, 376, 298, 315, 421, 395, 317, 263};
const std::vector<int32_t> kPromptC{1, 385, 328, 432};

std::vector<float> logits_alone(Model& model, int32_t seq, const std::vector<int32_t>& prompt) {
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({seq, prompt[i], static_cast<int32_t>(i), true});
    const auto l = model.decode(batch);
    return {l.begin(), l.end()};
}

}  // namespace

TEST_CASE("logits do not depend on the other sequences in the batch", "[engine]") {
    for (const char* stem : {"stories260K", "synth-gemma3-q4_k_m"}) {
        backends::cpu::CpuBackend backend(2);
        EngineOptions opt;
        opt.cache.block_size = 4;  // several blocks per sequence
        Model model(models::load_model(test::shared_path(std::string("models/") + stem + ".gguf")), backend, opt);
        const std::vector<float> alone = logits_alone(model, 0, kPromptA);
        model.truncate(0, 0);

        // A, B and C interleaved token by token in one batch, then A alone continues.
        std::vector<BatchToken> batch;
        std::vector<size_t> a_rows;
        for (size_t i = 0; i < kPromptA.size(); ++i) {
            a_rows.push_back(batch.size());
            batch.push_back({0, kPromptA[i], static_cast<int32_t>(i), true});
            if (i < kPromptB.size()) batch.push_back({1, kPromptB[i], static_cast<int32_t>(i), true});
            if (i < kPromptC.size()) batch.push_back({2, kPromptC[i], static_cast<int32_t>(i), true});
        }
        const auto mixed = model.decode(batch);
        const int64_t nv = model.n_vocab();
        INFO(stem);
        for (size_t i = 0; i < a_rows.size(); ++i) {
            const bool same = std::equal(alone.begin() + i * nv, alone.begin() + (i + 1) * nv, mixed.begin() + a_rows[i] * nv);
            CHECK(same);
        }

        // The same prompt fed in steps of 5 tokens (chunked prefill) gives the same logits.
        model.truncate(0, 0);
        for (size_t first = 0; first < kPromptA.size(); first += 5) {
            std::vector<BatchToken> chunk;
            for (size_t i = first; i < std::min(kPromptA.size(), first + 5); ++i)
                chunk.push_back({0, kPromptA[i], static_cast<int32_t>(i), true});
            const auto l = model.decode(chunk);
            CHECK(std::equal(l.begin(), l.end(), alone.begin() + first * nv));
        }

        // A fork shares A's first 10 positions (2.5 blocks) and continues like A.
        model.fork(0, 3, 10);
        std::vector<BatchToken> rest;
        for (size_t i = 10; i < kPromptA.size(); ++i) rest.push_back({3, kPromptA[i], static_cast<int32_t>(i), true});
        const auto forked = model.decode(rest);
        CHECK(std::equal(forked.begin(), forked.end(), alone.begin() + 10 * nv));
    }
}

TEST_CASE("rows that want no logits do not change the rows that do", "[engine]") {
    // The final layer computes its output only for the rows that want logits (forward.cpp); the
    // others still leave their K and V in the cache for later steps.
    for (const char* stem : {"stories260K", "synth-gemma3-q4_k_m"}) {
        INFO(stem);
        backends::cpu::CpuBackend backend(2);
        EngineOptions opt;
        opt.cache.block_size = 4;
        Model model(models::load_model(test::shared_path(std::string("models/") + stem + ".gguf")), backend, opt);
        const int64_t nv = model.n_vocab();
        const std::vector<float> alone = logits_alone(model, 0, kPromptA);
        model.truncate(0, 0);

        // A's first 6 tokens want nothing, then A (rows 7, 11, last) shares a batch with B (last only).
        std::vector<BatchToken> first;
        for (size_t i = 0; i < 6; ++i) first.push_back({0, kPromptA[i], static_cast<int32_t>(i), false});
        CHECK(model.decode(first).empty());
        std::vector<BatchToken> batch;
        std::vector<size_t> a_wanted;
        for (size_t i = 6; i < kPromptA.size(); ++i) {
            const bool want = i == 7 || i == 11 || i + 1 == kPromptA.size();
            if (want) a_wanted.push_back(i);
            batch.push_back({0, kPromptA[i], static_cast<int32_t>(i), want});
            if (i - 6 < kPromptB.size())
                batch.push_back({1, kPromptB[i - 6], static_cast<int32_t>(i - 6), i - 6 + 1 == kPromptB.size()});
        }
        const auto l = model.decode(batch);
        REQUIRE(l.size() == (a_wanted.size() + 1) * static_cast<size_t>(nv));
        // Rows come in batch order: B's last token (batch index 17) comes after A's rows 7 and 11.
        const std::vector<size_t> a_at{0, 1, 3};
        for (size_t r = 0; r < a_wanted.size(); ++r) {
            INFO("A position " << a_wanted[r]);
            CHECK(std::equal(l.begin() + a_at[r] * nv, l.begin() + (a_at[r] + 1) * nv, alone.begin() + a_wanted[r] * nv));
        }
        const std::vector<float> b_alone = [&] {
            Model other(models::load_model(test::shared_path(std::string("models/") + stem + ".gguf")), backend, opt);
            return logits_alone(other, 0, kPromptB);
        }();
        CHECK(std::equal(l.begin() + 2 * nv, l.begin() + 3 * nv, b_alone.end() - nv));
    }
}

TEST_CASE("decode rejects out-of-order positions and bad token ids", "[engine]") {
    backends::cpu::CpuBackend backend(1);
    Model model(models::load_model(test::shared_path("models/stories260K.gguf")), backend);
    const BatchToken skip{0, 1, 1, true};
    CHECK_THROWS_WITH(model.decode(std::span(&skip, 1)), Catch::Contains("expects position 0"));
    const BatchToken bad{0, 512, 0, true};
    CHECK_THROWS_WITH(model.decode(std::span(&bad, 1)), Catch::Contains("token id 512"));
}

TEST_CASE("an unsupported architecture is rejected at load with its name", "[engine]") {
    models::ModelInfo info = models::load_model(test::shared_path("models/stories260K.gguf"));
    info.hparams.architecture = "mamba";
    backends::cpu::CpuBackend backend(1);
    CHECK_THROWS_WITH(Model(info, backend), Catch::Contains("unsupported architecture 'mamba'"));
}

}  // namespace deskside::engine
