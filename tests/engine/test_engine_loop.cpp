// The engine loop with continuous batching against llama.cpp's greedy runs: all five reference
// prompts submitted at once, with fewer slots than prompts (so some wait in the queue) and a step
// budget smaller than a prompt (so prefill is chunked), must each give llama.cpp's tokens.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <optional>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_backend.h"
#include "engine/engine_loop.h"
#include "engine/grammar.h"
#include "engine/model.h"
#include "models/model.h"
#include "models/tokenizer/tokenizer.h"
#include "support/paths.h"

namespace deskside::engine {
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

// stories260K on the CPU with a KV cache of `positions`, and llama.cpp's reference runs of it.
struct Stories {
    explicit Stories(int64_t positions, int threads = 2)
        : ref(nlohmann::json::parse(std::ifstream(test::shared_path("reference/stories260K.json")))),
          tokenizer(models::Tokenizer::load(test::shared_path("models/stories260K.gguf"))),
          backend(threads),
          model(models::load_model(test::shared_path("models/stories260K.gguf")), backend, options(positions)) {}
    static EngineOptions options(int64_t positions) {
        EngineOptions o;
        o.cache.n_positions = positions;
        return o;
    }
    nlohmann::json ref;
    std::unique_ptr<models::Tokenizer> tokenizer;
    backends::cpu::CpuBackend backend;
    Model model;
};

}  // namespace

TEST_CASE("engine loop: concurrent greedy jobs reproduce llama.cpp's tokens", "[engine-loop]") {
    Stories st(3 * 128, 2);
    const nlohmann::json& ref = st.ref;
    const auto& tokenizer = st.tokenizer;
    Model& model = st.model;
    LoopStats metrics;
    EngineLoopOptions lo;
    lo.max_running = 3;
    lo.n_ctx = 128;
    lo.n_batch = 6;  // shorter than the longest prompt (14 tokens)
    EngineLoop loop(model, *tokenizer, lo, &metrics);

    std::vector<JobSpec> jobs;
    for (const auto& c : ref.at("cases")) {
        JobSpec j;
        j.prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
        j.max_tokens = static_cast<int64_t>(c.at("greedy_tokens").size());
        j.sampling.temperature = 0;
        jobs.push_back(j);
    }
    auto stream = loop.submit(jobs);
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
        auto again = loop.submit({jobs[3]});
        std::vector<JobEvent> f2;
        const auto t2 = drain(*again, 1, &f2);
        CHECK(t2[0] == tokens[3]);
        CHECK(f2[0].cached_tokens == static_cast<int64_t>(jobs[3].prompt.size()) - 1);
    }
    SECTION("a request with more jobs than the queue can ever hold is refused as invalid, naming --queue") {
        EngineLoopOptions tiny = lo;
        tiny.max_queue = 2;
        EngineLoop small(model, *tokenizer, tiny, &metrics);
        CHECK_THROWS_AS(small.submit(jobs), std::invalid_argument);
        CHECK_THROWS_WITH(small.submit(jobs), Catch::Contains("--queue"));
    }
    SECTION("a full queue refuses the whole request") {
        EngineLoopOptions none = lo;
        none.max_queue = 0;
        EngineLoop small(model, *tokenizer, none, &metrics);
        CHECK_THROWS_AS(small.submit({jobs[0]}), QueueFull);
    }
}

TEST_CASE("engine loop: a token id outside the model fails only its own job", "[engine-loop]") {
    // Issue #19, defect 10: one request's bad id once failed the whole step, and with it an
    // unrelated stream. Here the bad job and a good one share steps: the bad one ends with an
    // error naming the vocabulary, the good one gives llama.cpp's greedy tokens.
    Stories st(2 * 128, 2);
    LoopStats metrics;
    EngineLoopOptions lo;
    lo.max_running = 2;
    lo.n_ctx = 128;
    EngineLoop loop(st.model, *st.tokenizer, lo, &metrics);
    const nlohmann::json& c = st.ref["cases"][0];
    JobSpec good;
    good.prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
    good.max_tokens = static_cast<int64_t>(c.at("greedy_tokens").size());
    good.sampling.temperature = 0;
    JobSpec bad = good;
    bad.prompt.push_back(static_cast<int32_t>(st.model.n_vocab()));  // one past the last row
    auto bad_stream = loop.submit({bad});
    auto good_stream = loop.submit({good});
    std::optional<JobEvent> bad_end;
    while (!bad_end) {
        auto e = bad_stream->pop(std::chrono::milliseconds(60000));
        REQUIRE(e);
        if (e->done) bad_end = *e;
    }
    CHECK(bad_end->finish_reason == "error");
    CHECK(bad_end->error.find("outside the model's vocabulary") != std::string::npos);
    CHECK(drain(*good_stream, 1)[0] == c.at("greedy_tokens").get<std::vector<int32_t>>());
}

TEST_CASE("engine loop: a prompt reuses the computed prefix of a running sequence", "[engine-loop]") {
    // Job A generates llama.cpp's greedy continuation of case 0; job B's prompt is A's prompt plus
    // the first kShared tokens A generates. Submitted while A runs, B must fork A's computed
    // positions (the other slot is empty, so nothing else can supply them) and continue with
    // llama.cpp's tokens, also after A is cancelled and drops its references to the shared blocks.
    Stories st(2 * 512, 2);
    const nlohmann::json& ref = st.ref;
    const auto& tokenizer = st.tokenizer;
    Model& model = st.model;
    LoopStats metrics;
    EngineLoopOptions lo;
    lo.max_running = 2;
    lo.n_ctx = 512;
    EngineLoop loop(model, *tokenizer, lo, &metrics);

    const auto prompt = ref["cases"][0]["prompt_tokens"].get<std::vector<int32_t>>();
    const auto greedy = ref["cases"][0]["greedy_tokens"].get<std::vector<int32_t>>();
    constexpr size_t kShared = 20;  // A's generated tokens in B's prompt; not a block multiple

    JobSpec a;
    a.prompt = prompt;
    a.max_tokens = 500;  // runs far past the point where B arrives
    a.sampling.temperature = 0;
    for (const int32_t eog : tokenizer->eog_ids()) a.sampling.logit_bias.emplace_back(eog, -INFINITY);
    auto sa = loop.submit({a});
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
    auto sb = loop.submit({b});
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

}  // namespace deskside::engine

namespace deskside::engine {

TEST_CASE("engine loop: a flood of long and short jobs in a small shared KV cache all finish with their solo tokens",
          "[engine-loop]") {
    // 9 jobs want about 900 positions at once from a cache of 384: the loop must admit what fits,
    // preempt when the running ones outgrow it, and recompute the preempted ones later, and every
    // job's tokens must be those it gives alone (the sampled one too: its sampler survives).
    Stories st(3 * 128, 2);
    const nlohmann::json& ref = st.ref;
    const auto& tokenizer = st.tokenizer;
    Model& model = st.model;

    std::vector<JobSpec> jobs;
    for (const auto& c : ref.at("cases")) {
        JobSpec j;
        j.prompt = c.at("prompt_tokens").get<std::vector<int32_t>>();
        j.max_tokens = 64;
        j.sampling.temperature = 0;
        jobs.push_back(j);
    }
    for (int i = 0; i < 4; ++i) {
        JobSpec j = jobs[static_cast<size_t>(i)];
        j.max_tokens = 110;
        for (const int32_t eog : tokenizer->eog_ids()) j.sampling.logit_bias.emplace_back(eog, -INFINITY);
        if (i == 3) {
            j.sampling.temperature = 1.0f;
            j.sampling.seed = 7;
        }
        jobs.push_back(j);
    }

    EngineLoopOptions lo;
    lo.max_running = 8;
    lo.n_ctx = 128;
    lo.n_batch = 32;
    LoopStats solo_stats;
    std::vector<std::vector<int32_t>> solo;
    {
        EngineLoop loop(model, *tokenizer, lo, &solo_stats);
        for (const JobSpec& j : jobs) solo.push_back(drain(*loop.submit({j}), 1)[0]);
    }
    CHECK(solo_stats.preemptions == 0);
    for (size_t i = 0; i < 5; ++i) CHECK(solo[i] == ref["cases"][i]["greedy_tokens"].get<std::vector<int32_t>>());

    LoopStats stats;
    EngineLoop loop(model, *tokenizer, lo, &stats);
    const auto flood = drain(*loop.submit(jobs), jobs.size());
    CHECK(stats.preemptions > 0);
    for (size_t i = 0; i < jobs.size(); ++i) {
        INFO("job " << i);
        CHECK(flood[i] == solo[i]);
    }
}

TEST_CASE("engine loop: a stop string found by the reader ends the job and keeps its prefix", "[engine-loop]") {
    Stories st(256, 1);
    const auto& tokenizer = st.tokenizer;
    Model& model = st.model;
    EngineLoopOptions lo;
    lo.n_ctx = 256;
    LoopStats stats;
    EngineLoop loop(model, *tokenizer, lo, &stats);
    JobSpec j;
    j.prompt = tokenizer->encode("Once upon a time", true, false);
    j.max_tokens = 64;
    j.sampling.temperature = 0;
    j.stop = {" named"};
    std::vector<JobEvent> finals;
    std::string text;
    const auto stream = loop.submit({j});
    for (;;) {
        auto e = stream->pop(std::chrono::milliseconds(60000));
        REQUIRE(e);
        text += e->text;
        if (e->done) {
            finals.push_back(*e);
            break;
        }
    }
    CHECK(text == ", there was a little girl");  // llama.cpp's greedy text, cut before " named"
    CHECK(finals[0].finish_reason == "stop");
    // Tokens counted are those up to the one that completed the stop string, not the ones the
    // engine sampled before it saw the reader's stop.
    JobSpec free_run = j;
    free_run.stop.clear();
    const std::vector<int32_t> all = drain(*loop.submit({free_run}), 1)[0];
    size_t n = 0;
    while (n < all.size() && tokenizer->decode(std::span(all).first(n)).find(" named") == std::string::npos) ++n;
    CHECK(finals[0].completion_tokens == static_cast<int64_t>(n));
    // The same prompt again: the stopped job's blocks are still cached.
    const auto again = loop.submit({j});
    std::vector<JobEvent> f2;
    drain(*again, 1, &f2);
    CHECK(f2[0].cached_tokens == static_cast<int64_t>(j.prompt.size()) - 1);
}

// Runs one job to the end; returns its text and final event.
std::pair<std::string, JobEvent> run_text(EngineLoop& loop, const JobSpec& j) {
    std::string text;
    const auto stream = loop.submit({j});
    for (;;) {
        auto e = stream->pop(std::chrono::milliseconds(60000));
        REQUIRE(e);
        text += e->text;
        if (e->done) return {text, *e};
    }
}

TEST_CASE("engine loop: a lazy grammar leaves the text free until its trigger, then holds what follows",
          "[engine-loop]") {
    Stories st(256, 1);
    EngineLoopOptions lo;
    lo.n_ctx = 256;
    EngineLoop loop(st.model, *st.tokenizer, lo);
    JobSpec j;
    j.prompt = st.tokenizer->encode("Once upon a time", true, false);
    j.max_tokens = 24;
    j.sampling.temperature = 0;
    const auto [free_text, free_end] = run_text(loop, j);
    REQUIRE(free_text.rfind(", there was a little girl", 0) == 0);  // llama.cpp's greedy text

    GrammarBuilder b;
    j.grammar = b.build(b.literal(" cat."));
    j.grammar_trigger = " little";
    const auto [text, end] = run_text(loop, j);
    CHECK(text == ", there was a little cat.");  // free up to the trigger, then the grammar, then the end
    CHECK(end.finish_reason == "stop");

    // A token that would complete the trigger with bytes the grammar rejects is not drawn: " little"
    // completes " lit" with "tle", which "x" does not allow.
    GrammarBuilder b2;
    j.grammar = b2.build(b2.literal("x"));
    j.grammar_trigger = " lit";
    const auto [banned, banned_end] = run_text(loop, j);
    INFO(banned);
    CHECK(banned.find(" little") == std::string::npos);
    if (const size_t at = banned.find(" lit"); at != std::string::npos) CHECK(banned.substr(at) == " litx");
    CHECK(banned_end.finish_reason != "error");
    CHECK(banned.rfind(", there was a", 0) == 0);  // free before the trigger: the greedy text
}

TEST_CASE("request stream: prompt logprobs from rows the reader scores and entries the engine scored, merged",
          "[engine-loop]") {
    Stories st(64, 1);
    RequestStream stream(*st.tokenizer, {OutputOptions{{}, true, 2}});
    const std::vector<float> row_a = {0.5f, -1.0f, 2.0f, 0.0f}, row_b = {1.0f, 1.0f, -3.0f, 0.25f};
    CHECK(stream.row_room(4) > 0);
    // Positions 1 and 3 as rows (the reader's share), position 2 scored by the engine (beyond the budget).
    TokenStep rows;
    rows.prompt_tokens = 4;
    rows.prompt_rows.push_back({1, 2, row_a});
    rows.prompt_rows.push_back({3, 0, row_b});
    stream.push(std::move(rows));
    TokenStep last;
    last.done = true;
    last.finish_reason = "length";
    last.prompt_tokens = 4;
    last.prompt_logprobs.resize(4);
    last.prompt_logprobs[2] = token_logprob(row_b, 1, 2);
    stream.push(std::move(last));
    std::optional<JobEvent> e;
    while (!(e = stream.pop(std::chrono::milliseconds(1000)))) {
    }
    REQUIRE(e->done);
    REQUIRE(e->prompt_logprobs.size() == 4);
    CHECK_FALSE(e->prompt_logprobs[0]);
    const auto same = [](const std::optional<TokenLogprob>& got, const TokenLogprob& want) {
        REQUIRE(got);
        CHECK(got->id == want.id);
        CHECK(got->logprob == want.logprob);
        CHECK(got->top == want.top);
    };
    same(e->prompt_logprobs[1], token_logprob(row_a, 2, 2));
    same(e->prompt_logprobs[2], token_logprob(row_b, 1, 2));
    same(e->prompt_logprobs[3], token_logprob(row_b, 0, 2));
    // Popped rows free their room again.
    CHECK(stream.row_room(4) == RequestStream::kRowBudgetBytes / 16);
}

}  // namespace deskside::engine
