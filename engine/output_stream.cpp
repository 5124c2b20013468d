#include "engine/output_stream.h"

#include <algorithm>
#include <cmath>

namespace deskside::engine {

TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int64_t top) {
    const float mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (const float x : logits) sum += std::exp(static_cast<double>(x - mx));
    const double log_z = mx + std::log(sum);
    TokenLogprob t;
    t.id = id;
    t.logprob = static_cast<float>(logits[id] - log_z);
    if (top > 0) {
        std::vector<int32_t> ids(logits.size());
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
        const auto k = std::min<size_t>(static_cast<size_t>(top), ids.size());
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        });
        for (size_t i = 0; i < k; ++i) t.top.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - log_z));
    }
    return t;
}

namespace {

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
size_t stop_prefix_suffix(const std::string& text, const std::vector<std::string>& stops) {
    size_t best = 0;
    for (const std::string& s : stops)
        for (size_t n = std::min(text.size(), s.size() - 1); n > best; --n)
            if (text.compare(text.size() - n, n, s, 0, n) == 0) {
                best = n;
                break;
            }
    return best;
}

int64_t rows_in(const TokenStep& step) {
    return (step.logits.empty() ? 0 : 1) + static_cast<int64_t>(step.prompt_rows.size());
}

}  // namespace

RequestStream::RequestStream(const models::Tokenizer& tokenizer, std::vector<OutputOptions> choices)
    : tokenizer_(tokenizer) {
    for (OutputOptions& o : choices) choices_.emplace_back(std::move(o), tokenizer_);
}

void RequestStream::push(TokenStep step) {
    pending_rows_ += rows_in(step);
    {
        std::lock_guard lock(mutex_);
        steps_.push_back(std::move(step));
    }
    cv_.notify_all();
}

bool RequestStream::stopped(size_t choice) const { return choice < choices_.size() && choices_[choice].stopped; }

std::optional<JobEvent> RequestStream::pop(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        TokenStep step;
        {
            std::unique_lock lock(mutex_);
            if (!cv_.wait_until(lock, deadline, [&] { return !steps_.empty(); })) return std::nullopt;
            step = std::move(steps_.front());
            steps_.pop_front();
        }
        pending_rows_ -= rows_in(step);
        if (auto e = process(std::move(step))) return e;
    }
}

std::optional<JobEvent> RequestStream::process(TokenStep step) {
    if (step.choice >= choices_.size()) return std::nullopt;
    Choice& c = choices_[step.choice];
    if (c.finished) return std::nullopt;  // steps the engine made before it saw a stop string
    c.prompt_tokens = step.prompt_tokens;
    c.cached_tokens = step.cached_tokens;
    const auto prompt_entry = [&c](size_t i) -> std::optional<TokenLogprob>& {
        if (c.prompt_logprobs.size() <= i) c.prompt_logprobs.resize(i + 1);
        return c.prompt_logprobs[i];
    };
    for (const PromptRow& r : step.prompt_rows)
        prompt_entry(static_cast<size_t>(r.index)) = token_logprob(r.logits, r.token, c.options.top_logprobs);
    for (size_t i = 0; i < step.prompt_logprobs.size(); ++i)
        if (step.prompt_logprobs[i]) prompt_entry(i) = std::move(step.prompt_logprobs[i]);
    if (!step.prompt_logprobs.empty()) prompt_entry(step.prompt_logprobs.size() - 1);  // the prompt's length
    if (step.token < 0 && !step.done) return std::nullopt;  // prompt rows only

    JobEvent e;
    e.choice = step.choice;
    const auto finish = [&](const std::string& reason) {
        c.finished = true;
        e.done = true;
        e.finish_reason = reason;
        e.prompt_tokens = c.prompt_tokens;
        e.cached_tokens = c.cached_tokens;
        e.completion_tokens = c.n_tokens;
        e.prompt_logprobs = std::move(c.prompt_logprobs);
        e.embedding = std::move(step.embedding);
    };
    if (step.done && step.finish_reason == "error") {
        c.finished = true;
        e.done = true;
        e.finish_reason = "error";
        e.error = step.error;
        return e;
    }
    if (step.token >= 0) {
        ++c.n_tokens;
        if (c.options.logprobs)
            e.tokens.push_back(step.scored ? std::move(*step.scored)
                                           : token_logprob(step.logits, step.token, c.options.top_logprobs));
        else
            e.tokens.push_back(TokenLogprob{step.token, 0, {}});
        c.held += c.decoder.push(step.token);
        // The earliest stop string in the text not yet sent ends the job there.
        size_t cut = std::string::npos;
        for (const std::string& s : c.options.stop) {
            const size_t at = c.held.find(s);
            if (at < cut) {
                cut = at;
                e.stop_matched = s;
            }
        }
        if (cut != std::string::npos) {
            c.held.resize(cut);
            c.stopped = true;
            e.text = std::move(c.held);
            finish("stop");
            return e;
        }
    }
    if (step.done) {
        c.held += c.decoder.flush();
        e.text = std::move(c.held);
        finish(step.finish_reason);
        return e;
    }
    const size_t keep = stop_prefix_suffix(c.held, c.options.stop);
    e.text = c.held.substr(0, c.held.size() - keep);
    c.held.erase(0, c.held.size() - keep);
    if (e.text.empty() && e.tokens.empty()) return std::nullopt;
    return e;
}

}  // namespace deskside::engine
