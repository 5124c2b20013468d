#include "engine/generation.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace deskside::engine {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool is_end_of_generation(const Model& model, const models::Tokenizer& tok, int32_t id) {
    const models::TokenizerInfo& info = model.info().tokenizer;
    return tok.is_eog(id) || (info.eos && *info.eos == id) || (info.eot && *info.eot == id);
}

}  // namespace

GenerateResult generate(Model& model, const models::Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateParams& params, const std::function<void(std::string_view)>& on_text) {
    if (prompt.empty()) throw std::invalid_argument("generate: the prompt has no tokens");
    GenerateResult result;
    Sampler sampler(params.sampling, model.n_vocab());
    for (int32_t t : prompt) sampler.accept(t);
    model.truncate(params.seq, 0);

    auto t0 = std::chrono::steady_clock::now();
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i)
        batch.push_back({params.seq, prompt[i], static_cast<int32_t>(i), i + 1 == prompt.size()});
    std::span<const float> logits = model.decode(batch);
    result.prompt_seconds = seconds_since(t0);

    // Text is released up to the point where a stop string could still begin.
    size_t longest_stop = 0;
    for (const std::string& s : params.stop) longest_stop = std::max(longest_stop, s.size());
    models::StreamDecoder stream(tokenizer);
    std::string text;
    size_t released = 0;
    const auto release = [&](size_t upto) {
        if (upto > released && on_text) on_text(std::string_view(text).substr(released, upto - released));
        released = std::max(released, upto);
    };

    t0 = std::chrono::steady_clock::now();
    result.finish_reason = "length";
    bool cut_at_stop_string = false;
    while (static_cast<int32_t>(result.tokens.size()) < params.max_tokens) {
        const int32_t next = sampler.sample(logits);
        if (is_end_of_generation(model, tokenizer, next)) {
            result.finish_reason = "stop";
            break;
        }
        sampler.accept(next);
        result.tokens.push_back(next);
        text += stream.push(next);

        size_t cut = std::string::npos;
        for (const std::string& s : params.stop) {
            if (s.empty()) continue;
            // Only the new tail can hold a new match.
            const size_t from = released > s.size() ? released - s.size() : 0;
            cut = std::min(cut, text.find(s, from));
        }
        if (cut != std::string::npos) {
            text.resize(cut);
            result.finish_reason = "stop";
            cut_at_stop_string = true;
            break;
        }
        release(text.size() > longest_stop ? text.size() - longest_stop : 0);
        if (static_cast<int32_t>(result.tokens.size()) == params.max_tokens) break;
        const BatchToken t{params.seq, next, static_cast<int32_t>(model.length(params.seq)), true};
        logits = model.decode(std::span(&t, 1));
    }
    if (!cut_at_stop_string) text += stream.flush();
    release(text.size());
    result.generation_seconds = seconds_since(t0);
    result.text = std::move(text);
    return result;
}

}  // namespace deskside::engine
