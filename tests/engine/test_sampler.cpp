// The sampler chain against the definitions it implements (softmax sampling, top-k, top-p,
// min-p, CTRL repetition penalty, OpenAI presence / frequency penalties), computed here.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "engine/sampler.h"

namespace deskside::engine {
namespace {

// Logits of a small vocabulary with a clear order: token i has logit (8 - i) / 2.
std::vector<float> ramp_logits() {
    std::vector<float> l(16);
    for (int i = 0; i < 16; ++i) l[i] = (8 - i) / 2.0f;
    return l;
}

std::map<int32_t, int> histogram(SamplerParams p, const std::vector<float>& logits, int draws) {
    Sampler s(p, static_cast<int64_t>(logits.size()));
    std::map<int32_t, int> h;
    for (int i = 0; i < draws; ++i) ++h[s.sample(logits)];
    return h;
}

SamplerParams unfiltered(float temperature) {
    SamplerParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

}  // namespace

TEST_CASE("temperature 0 is argmax of the biased, penalized logits", "[engine]") {
    const std::vector<float> l = ramp_logits();
    SamplerParams p = unfiltered(0);
    CHECK(Sampler(p, 16).sample(l) == 0);
    p.logit_bias = {{0, -INFINITY}};
    CHECK(Sampler(p, 16).sample(l) == 1);
    p.logit_bias = {{7, 10.0f}};
    CHECK(Sampler(p, 16).sample(l) == 7);
}

TEST_CASE("argmax is std::max_element's index: first of the largest, NaNs skipped", "[engine][sampler]") {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> level(-3, 3);  // few distinct values: many ties
    const auto reference = [](const std::vector<float>& l) {
        return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    };
    for (size_t n : {1, 3, 15, 16, 17, 63, 64, 65, 1000, 262144}) {
        std::vector<float> l(n);
        for (float& v : l) v = static_cast<float>(level(rng));
        INFO("n = " << n);
        CHECK(argmax(l) == reference(l));
        l[n / 2] = 3.5f;  // one clear maximum, then the same value again later (a tie)
        CHECK(argmax(l) == reference(l));
        l[n - 1] = 3.5f;
        CHECK(argmax(l) == reference(l));
        l[n / 3] = NAN;
        CHECK(argmax(l) == reference(l));
        l[0] = NAN;  // max_element keeps a NaN first element
        CHECK(argmax(l) == reference(l));
        std::fill(l.begin(), l.end(), -INFINITY);
        CHECK(argmax(l) == reference(l));
        l[n - 1] = -0.0f;
        if (n > 1) l[n - 2] = 0.0f;
        CHECK(argmax(l) == reference(l));
    }
}

TEST_CASE("draws follow softmax(logits / T)", "[engine]") {
    const std::vector<float> l = ramp_logits();
    const int draws = 40000;
    for (float t : {0.7f, 1.0f, 1.5f}) {
        const auto h = histogram(unfiltered(t), l, draws);
        double z = 0;
        for (float v : l) z += std::exp(v / t);
        for (int i = 0; i < 4; ++i) {
            const double p = std::exp(l[i] / t) / z;
            const double sd = std::sqrt(p * (1 - p) / draws);
            INFO("T " << t << " token " << i);
            CHECK(std::fabs(double(h.count(i) ? h.at(i) : 0) / draws - p) <= 5 * sd);  // 5 sigma
        }
    }
}

TEST_CASE("top-k, top-p and min-p keep only the tokens their definitions allow", "[engine]") {
    const std::vector<float> l = ramp_logits();
    SamplerParams p = unfiltered(1.0f);
    p.top_k = 3;
    for (const auto& [id, n] : histogram(p, l, 3000)) CHECK(id < 3);

    // top-p 0.7: the smallest prefix of the sorted distribution with mass >= 0.7.
    p = unfiltered(1.0f);
    p.top_p = 0.7f;
    double z = 0;
    for (float v : l) z += std::exp(v);
    int nucleus = 0;
    for (double mass = 0; mass < 0.7; ++nucleus) mass += std::exp(l[nucleus]) / z;
    const auto h = histogram(p, l, 3000);
    for (const auto& [id, n] : h) CHECK(id < nucleus);
    CHECK(static_cast<int>(h.size()) == nucleus);  // and every one of them appears

    // min-p 0.2: tokens with p >= 0.2 * p_max, i.e. logit >= l0 + ln 0.2.
    p = unfiltered(1.0f);
    p.min_p = 0.2f;
    for (const auto& [id, n] : histogram(p, l, 3000)) CHECK(l[id] >= l[0] + std::log(0.2f));
}

TEST_CASE("the same seed gives the same tokens", "[engine]") {
    const std::vector<float> l = ramp_logits();
    SamplerParams p = unfiltered(1.0f);
    p.seed = 42;
    Sampler a(p, 16), b(p, 16);
    std::vector<int32_t> ta, tb;
    for (int i = 0; i < 200; ++i) {
        ta.push_back(a.sample(l));
        tb.push_back(b.sample(l));
    }
    CHECK(ta == tb);
    p.seed = 43;
    Sampler c(p, 16);
    std::vector<int32_t> tc;
    for (int i = 0; i < 200; ++i) tc.push_back(c.sample(l));
    CHECK(tc != ta);
}

TEST_CASE("repetition, presence and frequency penalties change the recent tokens' logits", "[engine]") {
    // Token 0 leads by 0.5 over token 1; penalties on token 0 must hand greedy to token 1.
    std::vector<float> l{2.0f, 1.5f, -1.0f, -3.0f};
    SamplerParams p = unfiltered(0);
    p.repeat_penalty = 1.5f;  // 2.0 / 1.5 = 1.33 < 1.5
    Sampler s(p, 4);
    s.accept(0);
    CHECK(s.sample(l) == 1);

    // Negative logits are multiplied: token 2 (-1.0 -> -1.5) falls below token 3 only if the
    // penalty is applied the CTRL way; make 2 and 3 the only candidates by banning 0 and 1.
    p.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
    p.repeat_penalty = 4.0f;  // -1.0 * 4 = -4 < -3
    Sampler neg(p, 4);
    neg.accept(2);
    CHECK(neg.sample(l) == 3);

    p = unfiltered(0);
    p.frequency_penalty = 0.3f;  // token 0 seen twice: 2.0 - 0.6 = 1.4 < 1.5
    Sampler f(p, 4);
    f.accept(0);
    f.accept(0);
    CHECK(f.sample(l) == 1);
    p.frequency_penalty = 0;
    p.presence_penalty = 0.4f;  // once, however often: 2.0 - 0.4 = 1.6 > 1.5
    Sampler pr(p, 4);
    pr.accept(0);
    pr.accept(0);
    CHECK(pr.sample(l) == 0);
    p.presence_penalty = 0.6f;  // 1.4 < 1.5
    Sampler pr2(p, 4);
    pr2.accept(0);
    CHECK(pr2.sample(l) == 1);
}

TEST_CASE("sampler parameters out of range are rejected with their name", "[engine]") {
    SamplerParams p;
    p.top_p = 0;
    CHECK_THROWS_WITH(Sampler(p, 16), Catch::Contains("top_p"));
    p = SamplerParams{};
    p.logit_bias = {{99, 1.0f}};
    CHECK_THROWS_WITH(Sampler(p, 16), Catch::Contains("logit_bias token 99"));
}

}  // namespace deskside::engine
