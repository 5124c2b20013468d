// The one generation loop (DESIGN.md key decision 4): `serve`, `chat` and `generate` all submit
// jobs here and read their output from a RequestStream (engine/output_stream.h).
//
// One thread runs the model. Between steps it admits waiting jobs while the KV cache has free
// blocks for their prompts (engine/scheduler.h), asks plan_step how many tokens each running job
// puts into the next batch, runs one Model::decode for all of them, and samples. The cache is one
// pool of blocks that any mix of short and long sequences shares; when a step needs more blocks
// than are free, idle cached prefixes are dropped first (least recently used), then the job
// admitted last is preempted: its blocks are freed and it waits at the head of the queue to be
// recomputed (prompt and the tokens it already generated), continuing with the same sampler, so
// its tokens are those it would have produced unpreempted.
//
// A sequence keeps its KV blocks after its job ends. A new prompt that starts with tokens some
// sequence has already computed, idle or still running (a chat's next turn, a shared system
// prompt), reuses them: in place, or through Model::fork, which shares the blocks. A cancelled
// job (disconnected client, Ctrl-C) frees its blocks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/model.h"
#include "engine/output_stream.h"
#include "engine/pooling.h"
#include "engine/sampler.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::engine {

class Grammar;
class GrammarVocab;

struct JobSpec {
    std::vector<int32_t> prompt;
    int64_t max_tokens = 16;       // < 0: until the end of generation or the context
    SamplerParams sampling;
    std::vector<std::string> stop;
    bool logprobs = false;
    int64_t top_logprobs = 0;
    bool prompt_logprobs = false;  // echo with logprobs: score every prompt token
    // Constrains the sampled tokens (structured output, forced tool calls); null: free.
    std::shared_ptr<const Grammar> grammar;
    // Non-empty: `grammar` is lazy (strict tools with tool_choice auto, as llama.cpp's lazy
    // grammars): the answer is free until its text contains this string, and from there the text
    // after it must follow `grammar`. A token that completes the trigger with bytes the grammar
    // rejects is not drawn.
    std::string grammar_trigger;
    // An embedding job: the prompt's final hidden states pooled, no tokens; the final event
    // carries the vector (JobEvent::embedding).
    bool embed = false;
    Pooling pooling = Pooling::Last;
};

class QueueFull : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

// Counters and gauges the loop keeps up to date; a server exports them (server/metrics.h).
struct LoopStats {
    virtual ~LoopStats() = default;
    std::atomic<uint64_t> prompt_tokens{0};
    std::atomic<uint64_t> cached_prompt_tokens{0};
    std::atomic<uint64_t> generated_tokens{0};
    std::atomic<uint64_t> preemptions{0};
    std::atomic<uint64_t> cancelled_sequences{0};  // given up by their client (a closed connection, Stop)
    std::atomic<int64_t> queue_depth{0};
    std::atomic<int64_t> running_sequences{0};
    std::atomic<int64_t> kv_blocks_used{0};
    std::atomic<int64_t> kv_blocks_total{0};
    // Seconds from arrival to a job's first token, and between its tokens.
    virtual void observe_first_token(double) {}
    virtual void observe_inter_token(double) {}
};

struct EngineLoopOptions {
    int64_t max_running = 16;  // sequences generating at once (they share the KV cache's blocks)
    int64_t max_queue = 64;    // waiting jobs at most
    int64_t n_ctx = 2048;      // positions per sequence at most (prompt + generated)
    int64_t n_batch = 512;     // tokens per step
};

class EngineLoop {
   public:
    // `stats` may be null; both must outlive the loop.
    EngineLoop(Model& model, const models::Tokenizer& tokenizer, EngineLoopOptions options, LoopStats* stats = nullptr);
    ~EngineLoop();
    EngineLoop(const EngineLoop&) = delete;
    EngineLoop& operator=(const EngineLoop&) = delete;

    // Queues all jobs of a request (all or none); their events come out of the returned stream,
    // choice = index in `jobs`. Throws QueueFull when the queue has no room for them, and
    // std::invalid_argument naming the parameter the sampler refuses.
    std::shared_ptr<RequestStream> submit(std::vector<JobSpec> jobs);
    // Jobs waiting or running.
    int64_t busy() const;
    // Ends every job (their streams get done events with finish_reason "error").
    void cancel_all(const std::string& why);
    const EngineLoopOptions& options() const { return options_; }

   private:
    struct Job;
    struct Sequence;
    void run();
    void admit();
    bool make_room(int64_t blocks, const Job* keep);
    void step();
    void embed_step(Job& job);
    void sample(Job& job, std::span<const float> logits);
    void finish(Job& job, const std::string& reason, const std::string& error = {});
    void preempt(Job& job);
    void release_finished();
    void update_gauges();

    Model& model_;
    const models::Tokenizer& tokenizer_;
    EngineLoopOptions options_;
    LoopStats own_stats_;
    LoopStats& stats_;
    int64_t block_size_;

    mutable std::mutex mutex_;  // guards waiting_, stop_ and cancel_reason_
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Job>> waiting_;
    bool stop_ = false;
    std::string cancel_reason_;
    std::atomic<int64_t> n_running_{0};

    // Engine thread only.
    std::vector<std::unique_ptr<Sequence>> sequences_;
    std::vector<std::unique_ptr<Job>> running_;
    uint64_t clock_ = 0;  // orders sequences by last use
    std::vector<float> masked_;  // a logits row with the grammar's mask applied
    std::once_flag vocab_once_;
    std::shared_ptr<const GrammarVocab> vocab_;
    std::thread thread_;
};

}  // namespace deskside::engine
