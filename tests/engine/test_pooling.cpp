// Model::embed and engine/pooling.h: the hidden states are exactly what the output head reads
// (its matmul over them gives decode()'s logits), they keep decode()'s batch invariance, and
// pooling is the stated mean / first / last token, L2-normalised.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/model.h"
#include "engine/pooling.h"
#include "models/model.h"
#include "support/paths.h"

namespace deskside::engine {
namespace {

const std::vector<int32_t> kPrompt{1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
const std::vector<int32_t> kOther{1, 291, 376, 298};

std::vector<BatchToken> sequence(int32_t seq, const std::vector<int32_t>& tokens, bool all) {
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < tokens.size(); ++i)
        batch.push_back({seq, tokens[i], static_cast<int32_t>(i), all || i + 1 == tokens.size()});
    return batch;
}

double norm(const std::vector<float>& v) {
    double s = 0;
    for (const float x : v) s += static_cast<double>(x) * x;
    return std::sqrt(s);
}

}  // namespace

TEST_CASE("embed returns the output head's input", "[engine][pooling]") {
    backends::cpu::CpuBackend backend(2);
    models::ModelInfo info = models::load_model(test::shared_path("models/stories260K.gguf"));
    const models::Tensor* head = info.find("output.weight");
    if (!head) head = info.find("token_embd.weight");
    REQUIRE(head);
    REQUIRE(head->type == quant::TypeId::F32);
    const auto* w = reinterpret_cast<const float*>(head->data);  // [n_embd, n_vocab]
    Model model(info, backend);
    const int64_t d = model.hparams().n_embd, nv = model.n_vocab();

    const auto h = model.embed(sequence(0, kPrompt, false));
    REQUIRE(static_cast<int64_t>(h.size()) == d);
    const std::vector<float> hidden(h.begin(), h.end());
    model.truncate(0, 0);
    const auto l = model.decode(sequence(0, kPrompt, false));
    REQUIRE(static_cast<int64_t>(l.size()) == nv);
    // The CPU matmul may reduce in another order than this loop: F32 rounding only.
    for (int64_t t = 0; t < nv; ++t) {
        double dot = 0;
        for (int64_t j = 0; j < d; ++j) dot += static_cast<double>(w[t * d + j]) * hidden[j];
        REQUIRE(l[t] == Approx(dot).margin(1e-4));
    }
}

TEST_CASE("hidden states do not depend on the other sequences in the batch", "[engine][pooling]") {
    backends::cpu::CpuBackend backend(2);
    Model model(models::load_model(test::shared_path("models/stories260K.gguf")), backend);
    const auto a = model.embed(sequence(0, kPrompt, true));
    const std::vector<float> alone(a.begin(), a.end());
    model.truncate(0, 0);
    std::vector<BatchToken> mixed = sequence(1, kOther, true);
    for (const BatchToken& t : sequence(0, kPrompt, true)) mixed.push_back(t);
    const auto m = model.embed(mixed);
    const int64_t d = model.hparams().n_embd;
    REQUIRE(m.size() == (kOther.size() + kPrompt.size()) * static_cast<size_t>(d));
    CHECK(std::equal(alone.begin(), alone.end(), m.begin() + static_cast<std::ptrdiff_t>(kOther.size() * d)));
}

TEST_CASE("embed_sequence pools the rows its pooling names", "[engine][pooling]") {
    backends::cpu::CpuBackend backend(2);
    Model model(models::load_model(test::shared_path("models/stories260K.gguf")), backend);
    const int64_t d = model.hparams().n_embd;
    const auto all = model.embed(sequence(0, kPrompt, true));
    const std::vector<float> rows(all.begin(), all.end());
    model.truncate(0, 0);
    const auto n = static_cast<int64_t>(kPrompt.size());
    for (const Pooling p : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
        INFO(pooling_name(p));
        const std::vector<float> got = embed_sequence(model, 0, kPrompt, p);
        CHECK(model.length(0) == n);
        model.truncate(0, 0);
        std::vector<double> want(static_cast<size_t>(d), 0.0);
        int64_t used = 0;
        for (int64_t i = 0; i < n; ++i) {
            if (!(p == Pooling::Mean || (p == Pooling::Cls && i == 0) || (p == Pooling::Last && i == n - 1))) continue;
            ++used;
            for (int64_t j = 0; j < d; ++j) want[j] += rows[i * d + j];
        }
        double s = 0;
        for (double& x : want) {
            x /= static_cast<double>(used);
            s += x * x;
        }
        REQUIRE(static_cast<int64_t>(got.size()) == d);
        CHECK(norm(got) == Approx(1.0).margin(1e-6));
        for (int64_t j = 0; j < d; ++j) CHECK(got[j] == Approx(want[j] / std::sqrt(s)).margin(1e-6));
    }
    CHECK_THROWS_AS(embed_sequence(model, 0, std::vector<int32_t>{}, Pooling::Last), std::invalid_argument);
}

TEST_CASE("pooling comes from --pooling, else the file, else last", "[engine][pooling]") {
    models::Hparams hp;
    hp.architecture = "llama";
    CHECK(resolve_pooling(std::nullopt, hp) == Pooling::Last);
    hp.pooling_type = 0;
    CHECK(resolve_pooling(std::nullopt, hp) == Pooling::Last);
    hp.pooling_type = 1;
    CHECK(resolve_pooling(std::nullopt, hp) == Pooling::Mean);
    CHECK(resolve_pooling(Pooling::Cls, hp) == Pooling::Cls);
    hp.pooling_type = 4;
    CHECK(resolve_pooling(std::nullopt, hp) == Pooling::Rank);
    hp.pooling_type = 9;
    CHECK_THROWS_AS(resolve_pooling(std::nullopt, hp), std::invalid_argument);
    CHECK(parse_pooling("mean") == Pooling::Mean);
    CHECK(parse_pooling("cls") == Pooling::Cls);
    CHECK(parse_pooling("last") == Pooling::Last);
    CHECK_THROWS_AS(parse_pooling("rank"), std::invalid_argument);
    CHECK(pool_hidden(std::vector<float>{0, 0, 0}, 3) == std::vector<float>{0, 0, 0});
}

}  // namespace deskside::engine
