// The one thread that runs the model (DESIGN.md key decision 4): HTTP threads submit jobs and
// read their events from a RequestStream; the loop admits waiting jobs into free KV-cache
// slots, asks engine::plan_step how many tokens each running job puts into the next batch,
// runs one Model::decode for all of them, samples, and pushes text as it becomes final.
//
// Each slot keeps its sequence's KV blocks after the job ends. A new prompt that starts with
// tokens some slot has already computed, idle or still running (a chat's next turn, a shared
// system prompt), reuses them: in place, or through Model::fork, which shares the blocks. A
// cancelled job (disconnected client) frees its blocks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/model.h"
#include "engine/sampler.h"
#include "models/tokenizer/tokenizer.h"
#include "server/metrics.h"

namespace deskside::server {

struct TokenLogprob {
    int32_t id = 0;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;  // most likely tokens at this position, best first
};

struct JobSpec {
    std::vector<int32_t> prompt;
    int64_t max_tokens = 16;
    engine::SamplerParams sampling;
    std::vector<std::string> stop;
    bool logprobs = false;
    int64_t top_logprobs = 0;
    bool prompt_logprobs = false;  // echo with logprobs: score every prompt token
};

// What a job reports; `choice` says which job of the request it belongs to.
struct JobEvent {
    size_t choice = 0;
    std::string text;                   // newly final text (valid UTF-8, never part of a stop string)
    std::vector<TokenLogprob> tokens;   // tokens behind it (logprob fields set when asked)
    bool done = false;
    std::string finish_reason;          // "stop", "length" or "error" (with done)
    std::string error;
    int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;  // with done
    std::vector<std::optional<TokenLogprob>> prompt_logprobs;  // with done, when asked; [0] empty
};

// The events of one request's jobs, in order. Thread-safe.
class RequestStream {
   public:
    void push(JobEvent event);
    // Waits up to `timeout` for an event.
    std::optional<JobEvent> pop(std::chrono::milliseconds timeout);
    void cancel() { cancelled_ = true; }
    bool cancelled() const { return cancelled_; }

   private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<JobEvent> events_;
    std::atomic<bool> cancelled_{false};
};

class QueueFull : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

struct EngineLoopOptions {
    int64_t n_parallel = 4;  // running sequences at most (= KV cache slots)
    int64_t max_queue = 64;  // waiting jobs at most
    int64_t n_ctx = 2048;    // positions per sequence
    int64_t n_batch = 512;   // tokens per step
    int64_t kv_block_size = 16;
};

class EngineLoop {
   public:
    EngineLoop(engine::Model& model, const models::Tokenizer& tokenizer, EngineLoopOptions options, Metrics& metrics);
    ~EngineLoop();
    EngineLoop(const EngineLoop&) = delete;
    EngineLoop& operator=(const EngineLoop&) = delete;

    // Queues all jobs of a request (all or none); events go to `stream`, choice = index in `jobs`.
    // Throws QueueFull when the queue has no room for them.
    void submit(std::vector<JobSpec> jobs, std::shared_ptr<RequestStream> stream);
    // Jobs waiting or running.
    int64_t busy() const;
    // Ends every job (their streams get done events with finish_reason "error").
    void cancel_all(const std::string& why);

   private:
    struct Job;
    struct Slot {
        int32_t seq = 0;
        std::vector<int32_t> cached;  // tokens whose KV this slot holds
        Job* job = nullptr;
    };
    void run();
    void admit();
    void step();
    void sample(Job& job, std::span<const float> logits);
    void emit(Job& job, bool final);
    void finish(Job& job, const std::string& reason, const std::string& error = {});
    void release_finished();
    void update_gauges();

    engine::Model& model_;
    const models::Tokenizer& tokenizer_;
    EngineLoopOptions options_;
    Metrics& metrics_;

    mutable std::mutex mutex_;  // guards waiting_ and stop_
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Job>> waiting_;
    bool stop_ = false;
    std::string cancel_reason_;
    std::atomic<int64_t> n_running_{0};

    std::vector<Slot> slots_;  // engine thread only
    std::vector<std::unique_ptr<Job>> running_;
    std::thread thread_;
};

}  // namespace deskside::server
