// The engine loop with continuous batching against llama.cpp's greedy runs: all five reference
// prompts submitted at once, with fewer slots than prompts (so some wait in the queue) and a step
// budget smaller than a prompt (so prefill is chunked), must each give llama.cpp's tokens.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <optional>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_backend.h"
#include "engine/model.h"
#include "models/model.h"
#include "models/tokenizer/tokenizer.h"
#include "server/engine_loop.h"
#include "support/paths.h"

namespace deskside::server {
namespace {

// Runs until every choice of `stream` is done; returns the tokens per choice.
std::vector<std::vector<int32_t>> drain(RequestStream& stream, size_t n, std::vector<JobEvent>* finals = nullptr) {
    std::vector<std::vector<int32_t>> tokens(n);
    size_t done = 0;
    while (done < n) {
        auto e = stream.pop(std::chrono::milliseconds(60000));
        REQUIRE(e);
        REQUIRE(e->finish_reason != "error");
        for (const auto& t : e->tokens) tokens[e->choice].push_back(t.id);
        if (e->done) {
            ++done;
            if (finals) finals->push_back(*e);
        }
    }
    return tokens;
}

}  // namespace

TEST_CASE("engine loop: concurrent greedy jobs reproduce llama.cpp's tokens", "[server]") {
    const std::string path = test::shared_path("models/stories260K.gguf");
    std::ifstream jf(test::shared_path("reference/stories260K.json"));
    const nlohmann::json ref = nlohmann::json::parse(jf);
    const auto tokenizer = models::Tokenizer::load(path);
    backends::cpu::CpuBackend backend(2);
    engine::EngineOptions opt;
    opt.cache.n_positions = 3 * 128;
    engine::Model model(models::load_model(path), backend, opt);
    Metrics metrics;
    EngineLoopOptions lo;
    lo.n_parallel = 3;
    lo.n_ctx = 128;
    lo.n_batch = 6;  // shorter than the longest prompt (14 tokens)
    EngineLoop loop(model, *tokenizer, lo, metrics);

    std::vector<JobSpec> jobs;
    for (const auto& c : ref.at("cases")) {
        JobSpec j;
        j.prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
        j.max_tokens = static_cast<int64_t>(c.at("greedy_tokens").size());
        j.sampling.temperature = 0;
        jobs.push_back(j);
    }
    auto stream = std::make_shared<RequestStream>();
    loop.submit(jobs, stream);
    std::vector<JobEvent> finals;
    const auto tokens = drain(*stream, jobs.size(), &finals);
    for (size_t i = 0; i < jobs.size(); ++i) {
        INFO("case " << i);
        CHECK(tokens[i] == ref["cases"][i]["greedy_tokens"].get<std::vector<int32_t>>());
    }
    for (const JobEvent& f : finals) CHECK(f.finish_reason == "length");
    // The engine thread updates the gauge at the end of the step that emitted the final events,
    // so it may lag the events by one step; give it a bounded moment.
    for (int i = 0; i < 500 && metrics.running_sequences != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(metrics.running_sequences == 0);

    SECTION("a repeated prompt reuses the cached prefix and gives the same tokens") {
        auto again = std::make_shared<RequestStream>();
        loop.submit({jobs[3]}, again);
        std::vector<JobEvent> f2;
        const auto t2 = drain(*again, 1, &f2);
        CHECK(t2[0] == tokens[3]);
        CHECK(f2[0].cached_tokens == static_cast<int64_t>(jobs[3].prompt.size()) - 1);
    }
    SECTION("a full queue refuses the whole request") {
        EngineLoopOptions tiny = lo;
        tiny.max_queue = 2;
        EngineLoop small(model, *tokenizer, tiny, metrics);
        auto s = std::make_shared<RequestStream>();
        CHECK_THROWS_AS(small.submit(jobs, s), QueueFull);
    }
}

TEST_CASE("engine loop: a prompt reuses the computed prefix of a running sequence", "[server]") {
    // Job A generates llama.cpp's greedy continuation of case 0; job B's prompt is A's prompt plus
    // the first kShared tokens A generates. Submitted while A runs, B must fork A's computed
    // positions (the other slot is empty, so nothing else can supply them) and continue with
    // llama.cpp's tokens, also after A is cancelled and drops its references to the shared blocks.
    const std::string path = test::shared_path("models/stories260K.gguf");
    std::ifstream jf(test::shared_path("reference/stories260K.json"));
    const nlohmann::json ref = nlohmann::json::parse(jf);
    const auto tokenizer = models::Tokenizer::load(path);
    backends::cpu::CpuBackend backend(2);
    engine::EngineOptions opt;
    opt.cache.n_positions = 2 * 512;
    engine::Model model(models::load_model(path), backend, opt);
    Metrics metrics;
    EngineLoopOptions lo;
    lo.n_parallel = 2;
    lo.n_ctx = 512;
    EngineLoop loop(model, *tokenizer, lo, metrics);

    const auto prompt = ref["cases"][0]["prompt_tokens"].get<std::vector<int32_t>>();
    const auto greedy = ref["cases"][0]["greedy_tokens"].get<std::vector<int32_t>>();
    constexpr size_t kShared = 20;  // A's generated tokens in B's prompt; not a block multiple

    JobSpec a;
    a.prompt = prompt;
    a.max_tokens = 500;  // runs far past the point where B arrives
    a.sampling.temperature = 0;
    for (const int32_t eog : tokenizer->eog_ids()) a.sampling.logit_bias.emplace_back(eog, -INFINITY);
    auto sa = std::make_shared<RequestStream>();
    loop.submit({a}, sa);
    std::vector<int32_t> a_tokens;
    // A has computed position p once it has sampled the token after it: wait for kShared + 1.
    while (a_tokens.size() < kShared + 1) {
        auto e = sa->pop(std::chrono::milliseconds(60000));
        REQUIRE(e);
        REQUIRE(!e->done);
        for (const auto& t : e->tokens) a_tokens.push_back(t.id);
    }

    JobSpec b;
    b.prompt = prompt;
    b.prompt.insert(b.prompt.end(), greedy.begin(), greedy.begin() + kShared);
    b.max_tokens = static_cast<int64_t>(greedy.size() - kShared);
    b.sampling.temperature = 0;
    auto sb = std::make_shared<RequestStream>();
    loop.submit({b}, sb);
    std::vector<int32_t> b_tokens;
    std::optional<JobEvent> b_final;
    while (!b_final) {
        auto e = sb->pop(std::chrono::milliseconds(60000));
        REQUIRE(e);
        REQUIRE(e->finish_reason != "error");
        for (const auto& t : e->tokens) b_tokens.push_back(t.id);
        if (!b_tokens.empty()) sa->cancel();  // B now continues on blocks A shared with it
        if (e->done) b_final = *e;
    }
    CHECK(b_final->cached_tokens == static_cast<int64_t>(b.prompt.size()) - 1);
    CHECK(b_tokens == std::vector<int32_t>(greedy.begin() + kShared, greedy.end()));
    // A's tokens up to the fork are llama.cpp's too (the rest arrived after B was queued).
    CHECK(std::vector<int32_t>(a_tokens.begin(), a_tokens.begin() + kShared) ==
          std::vector<int32_t>(greedy.begin(), greedy.begin() + kShared));
    for (;;) {  // A ends cancelled: it was still running when B forked it

        auto e = sa->pop(std::chrono::milliseconds(60000));
        REQUIRE(e);
        if (e->done) {
            CHECK(e->finish_reason == "error");
            break;
        }
    }
}

}  // namespace deskside::server
