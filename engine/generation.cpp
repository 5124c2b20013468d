#include "engine/generation.h"

#include <chrono>
#include <stdexcept>

#include "engine/engine_loop.h"

namespace deskside::engine {

GenerateResult generate(Model& model, const models::Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateParams& params, const std::function<void(std::string_view)>& on_text) {
    if (prompt.empty()) throw std::invalid_argument("generate: the prompt has no tokens");
    EngineLoopOptions lo;
    lo.max_running = 1;
    lo.max_queue = 1;
    lo.n_ctx = model.kv_positions();
    EngineLoop loop(model, tokenizer, lo);
    JobSpec job;
    job.prompt.assign(prompt.begin(), prompt.end());
    job.max_tokens = params.max_tokens;
    job.sampling = params.sampling;
    job.stop = params.stop;

    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    std::optional<Clock::time_point> first;
    const std::shared_ptr<RequestStream> stream = loop.submit({std::move(job)});
    GenerateResult result;
    for (;;) {
        std::optional<JobEvent> e = stream->pop(std::chrono::milliseconds(100));
        if (!e) continue;
        if (!first && (!e->tokens.empty() || e->done)) first = Clock::now();
        for (const TokenLogprob& t : e->tokens) result.tokens.push_back(t.id);
        result.text += e->text;
        if (on_text && !e->text.empty()) on_text(e->text);
        if (!e->done) continue;
        if (e->finish_reason == "error") throw std::runtime_error("generation failed: " + e->error);
        result.finish_reason = e->finish_reason;
        break;
    }
    const auto t1 = Clock::now();
    result.prompt_seconds = std::chrono::duration<double>(*first - t0).count();
    result.generation_seconds = std::chrono::duration<double>(t1 - *first).count();
    return result;
}

}  // namespace deskside::engine
