// The output side of the generation loop (DESIGN.md key decision 4): what a request's jobs send
// back, and the work that turns raw tokens into text, done on the reader's thread.
//
// The engine thread pushes one TokenStep per generated token (the id, and the logits row when
// the job asked for logprobs) and a final step; RequestStream::pop, called by whoever waits for
// the answer (an HTTP thread, the CLI), detokenizes, matches stop strings and computes the
// log-softmax over the full vocabulary, so none of that delays the next step of other
// sequences. A stop string found by the reader ends its job: the engine sees the cancellation at
// its next step (the token or two it generated meanwhile are dropped, never shown or counted).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/tokenizer/tokenizer.h"

namespace deskside::engine {

struct TokenLogprob {
    int32_t id = 0;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;  // most likely tokens at this position, best first
};

// log-softmax of `logits` at `id`, and the `top` most likely tokens (ties: lower id first).
// ref: the OpenAI API's logprobs are those of the model's distribution before sampling adjustments.
TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int64_t top);

// What a job reports to its reader; `choice` says which job of the request it belongs to.
struct JobEvent {
    size_t choice = 0;
    std::string text;                   // newly final text (valid UTF-8, never part of a stop string)
    std::vector<TokenLogprob> tokens;   // tokens behind it (logprob fields set when asked)
    bool done = false;
    std::string finish_reason;          // "stop", "length" or "error" (with done)
    std::string stop_matched;           // with done: the stop string the text was cut at, if any
    std::string error;
    int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;  // with done
    std::vector<std::optional<TokenLogprob>> prompt_logprobs;  // with done, when asked; [0] empty
    std::vector<float> embedding;       // with done, for an embedding job: the pooled hidden state
};

// How a job's tokens become text: the reader-side half of a JobSpec.
struct OutputOptions {
    std::vector<std::string> stop;  // the text ends before the first occurrence of any
    bool logprobs = false;
    int64_t top_logprobs = 0;
};

// A prompt position's logits row, which the reader turns into that position's logprob entry.
struct PromptRow {
    int64_t index = 0;      // the position scored (its token is the prompt's token there)
    int32_t token = -1;
    std::vector<float> logits;
};

// One step's output of one job, as the engine thread sends it.
struct TokenStep {
    size_t choice = 0;
    int32_t token = -1;                  // -1: none (a final step without a new token)
    std::vector<float> logits;           // the row `token` was sampled from, when logprobs are asked
    std::optional<TokenLogprob> scored;  // or its logprob entry already computed (see kMaxPendingRows)
    bool done = false;
    std::string finish_reason, error;    // with done
    int64_t prompt_tokens = 0, cached_tokens = 0;  // on every step
    // Prompt logprobs (when asked): the rows the reader scores, sent with each prompt step, and
    // once, on the first step after the prompt, the entries the engine scored itself (the rows
    // beyond the budget), merged with them.
    std::vector<PromptRow> prompt_rows;
    std::vector<std::optional<TokenLogprob>> prompt_logprobs;
    std::vector<float> embedding;        // with done, for an embedding job
};

// The events of one request's jobs, in order. Thread-safe: one engine thread pushes, one reader pops.
class RequestStream {
   public:
    RequestStream(const models::Tokenizer& tokenizer, std::vector<OutputOptions> choices);

    // Engine side.
    void push(TokenStep step);
    // Logits rows pushed and not yet popped (a sampled token's, a prompt position's): the reader
    // scores them, off the engine thread. Beyond kMaxPendingRows, or kRowBudgetBytes of rows
    // when that is more, the engine scores the token itself, so a slow reader never holds more.
    static constexpr int64_t kMaxPendingRows = 8;
    static constexpr int64_t kRowBudgetBytes = int64_t{16} << 20;
    int64_t row_room(int64_t n_vocab) const {
        const int64_t most = std::max(kMaxPendingRows, kRowBudgetBytes / std::max<int64_t>(1, n_vocab * 4));
        return std::max<int64_t>(0, most - pending_rows_);
    }
    // The reader found a stop string in this job's text: the engine ends the job, keeping its KV.
    bool stopped(size_t choice) const;

    // Reader side. Waits up to `timeout` for an event.
    std::optional<JobEvent> pop(std::chrono::milliseconds timeout);
    // Ends every job of the request (a closed connection); their KV blocks are freed.
    void cancel() { cancelled_ = true; }
    // Ends one job where it is, as a stop string would (Ctrl-C in a chat): no final event
    // follows, and its KV blocks stay cached for the next prompt that shares them.
    void stop(size_t choice) {
        if (choice < choices_.size()) choices_[choice].stopped = true;
    }
    bool cancelled() const { return cancelled_; }
    size_t n_choices() const { return choices_.size(); }

   private:
    struct Choice {
        Choice(OutputOptions o, const models::Tokenizer& tok) : options(std::move(o)), decoder(tok) {}
        OutputOptions options;
        models::StreamDecoder decoder;
        std::string held;  // text that a stop string may still claim
        int64_t n_tokens = 0;
        int64_t prompt_tokens = 0, cached_tokens = 0;
        std::vector<std::optional<TokenLogprob>> prompt_logprobs;
        bool finished = false;  // a final event went out; later steps are dropped
        std::atomic<bool> stopped{false};  // the reader found a stop string: the engine ends the job
    };
    // Turns a step into the reader's event; nullopt when there is nothing to say yet.
    std::optional<JobEvent> process(TokenStep step);

    const models::Tokenizer& tokenizer_;
    std::deque<Choice> choices_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<TokenStep> steps_;
    std::atomic<int64_t> pending_rows_{0};
    std::atomic<bool> cancelled_{false};
};

}  // namespace deskside::engine
