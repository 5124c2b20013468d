// The engine loop with continuous batching against llama.cpp's greedy runs: all five reference
// prompts submitted at once, with fewer slots than prompts (so some wait in the queue) and a step
// budget smaller than a prompt (so prefill is chunked), must each give llama.cpp's tokens.
#include <catch2/catch.hpp>
#include <chrono>
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

}  // namespace deskside::server
