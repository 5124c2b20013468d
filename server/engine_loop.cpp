#include "server/engine_loop.h"

#include <algorithm>
#include <cmath>

#include "engine/scheduler.h"

namespace deskside::server {

using Clock = std::chrono::steady_clock;

void RequestStream::push(JobEvent event) {
    {
        std::lock_guard lock(mutex_);
        events_.push_back(std::move(event));
    }
    cv_.notify_all();
}

std::optional<JobEvent> RequestStream::pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    JobEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
}

struct EngineLoop::Job {
    Job(JobSpec s, std::shared_ptr<RequestStream> st, size_t c, const models::Tokenizer& tok, int64_t n_vocab)
        : spec(std::move(s)), stream(std::move(st)), choice(c), sampler(spec.sampling, n_vocab), decoder(tok) {}
    JobSpec spec;
    std::shared_ptr<RequestStream> stream;
    size_t choice;
    engine::Sampler sampler;
    models::StreamDecoder decoder;
    Slot* slot = nullptr;
    int64_t n_fed = 0;       // positions in the KV cache
    int64_t generated = 0;
    int32_t last_token = -1;  // sampled, not yet fed
    int64_t cached = 0;
    std::string held;         // text that a stop string may still claim
    std::vector<TokenLogprob> pending_tokens;
    std::vector<std::optional<TokenLogprob>> prompt_lp;
    bool done = false;
    bool stop_matched = false;  // the text was cut at a stop string
    Clock::time_point arrived = Clock::now();
    std::optional<Clock::time_point> last_token_at;
};

namespace {

// log-softmax of `logits` at `id`, and the `top` most likely tokens. ref: the OpenAI API's
// logprobs are log-probabilities of the model's distribution before sampling adjustments.
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

JobEvent error_event(size_t choice, const std::string& error) {
    JobEvent e;
    e.choice = choice;
    e.done = true;
    e.finish_reason = "error";
    e.error = error;
    return e;
}

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

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

}  // namespace

EngineLoop::EngineLoop(engine::Model& model, const models::Tokenizer& tokenizer, EngineLoopOptions options, Metrics& metrics)
    : model_(model), tokenizer_(tokenizer), options_(options), metrics_(metrics) {
    for (int64_t i = 0; i < options_.n_parallel; ++i) slots_.push_back(Slot{static_cast<int32_t>(i), {}, nullptr});
    thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void EngineLoop::submit(std::vector<JobSpec> jobs, std::shared_ptr<RequestStream> stream) {
    std::vector<std::unique_ptr<Job>> made;
    for (size_t i = 0; i < jobs.size(); ++i)
        made.push_back(std::make_unique<Job>(std::move(jobs[i]), stream, i, tokenizer_, model_.n_vocab()));
    {
        std::lock_guard lock(mutex_);
        if (static_cast<int64_t>(waiting_.size() + made.size()) > options_.max_queue)
            throw QueueFull("the request queue is full (" + std::to_string(options_.max_queue) + " waiting)");
        for (auto& j : made) waiting_.push_back(std::move(j));
        metrics_.queue_depth = static_cast<int64_t>(waiting_.size());
    }
    cv_.notify_all();
}

int64_t EngineLoop::busy() const {
    std::lock_guard lock(mutex_);
    return static_cast<int64_t>(waiting_.size()) + n_running_;
}

void EngineLoop::cancel_all(const std::string& why) {
    {
        std::lock_guard lock(mutex_);
        cancel_reason_ = why;
    }
    cv_.notify_all();
}

void EngineLoop::run() {
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running_.empty() || !cancel_reason_.empty(); });
            if (stop_) break;
            if (!cancel_reason_.empty()) {
                for (auto& j : waiting_) j->stream->push(error_event(j->choice, cancel_reason_));
                waiting_.clear();
            }
        }
        if (!cancel_reason_.empty()) {
            for (auto& j : running_) finish(*j, "error", cancel_reason_);
            release_finished();
            std::lock_guard lock(mutex_);
            cancel_reason_.clear();
        }
        admit();
        if (!running_.empty()) step();
        release_finished();
        update_gauges();
    }
    for (auto& j : running_) finish(*j, "error", "the server is shutting down");
}

void EngineLoop::admit() {
    std::vector<std::unique_ptr<Job>> taken;
    {
        std::lock_guard lock(mutex_);
        const int64_t n = engine::admit_count(static_cast<int64_t>(running_.size()), static_cast<int64_t>(waiting_.size()),
                                              options_.n_parallel);
        for (int64_t i = 0; i < n; ++i) {
            taken.push_back(std::move(waiting_.front()));
            waiting_.pop_front();
        }
        metrics_.queue_depth = static_cast<int64_t>(waiting_.size());
    }
    for (auto& job : taken) {
        const std::vector<int32_t>& prompt = job->spec.prompt;
        // The job runs in the free slot sharing the longest prefix with its prompt (ties: the one
        // caching the least, so longer idle prefixes survive for later requests).
        Slot* target = nullptr;
        size_t target_common = 0;
        for (Slot& s : slots_) {
            if (s.job) continue;
            const size_t common = common_prefix(s.cached, prompt);
            if (!target || common > target_common || (common == target_common && s.cached.size() < target->cached.size())) {
                target = &s;
                target_common = common;
            }
        }
        // Another slot, running or idle, may have computed more of the prompt (a shared system
        // prompt of a request still generating): the job then forks that slot's prefix. Its
        // `cached` tokens are exactly the positions in the KV cache, since admission happens
        // between steps.
        Slot* source = nullptr;
        size_t source_common = target_common;
        for (Slot& s : slots_) {
            if (&s == target) continue;
            const size_t common = common_prefix(s.cached, prompt);
            if (common > source_common) {
                source = &s;
                source_common = common;
            }
        }
        // At least the last prompt token is computed again: its logits start the generation.
        int64_t reuse = std::min<int64_t>(static_cast<int64_t>(source_common), static_cast<int64_t>(prompt.size()) - 1);
        if (job->spec.prompt_logprobs || reuse < 0) reuse = 0;
        if (source && reuse > static_cast<int64_t>(target_common)) {
            // Blocks are shared, not copied; the first write into a shared block copies it.
            model_.fork(source->seq, target->seq, reuse);
            target->cached.assign(source->cached.begin(), source->cached.begin() + reuse);
        } else {
            model_.truncate(target->seq, reuse);
            target->cached.resize(static_cast<size_t>(reuse));
        }
        target->job = job.get();
        job->slot = target;
        job->n_fed = reuse;
        job->cached = reuse;
        if (job->spec.prompt_logprobs) job->prompt_lp.resize(prompt.size());
        metrics_.prompt_tokens += prompt.size();
        metrics_.cached_prompt_tokens += static_cast<uint64_t>(reuse);
        if (job->stream->cancelled()) {
            finish(*job, "error", "cancelled");
        } else if (job->spec.max_tokens == 0 && !job->spec.prompt_logprobs) {
            finish(*job, "length");
        }
        running_.push_back(std::move(job));
        ++n_running_;
    }
}

void EngineLoop::step() {
    std::vector<engine::SequenceDemand> demands;
    std::vector<Job*> jobs;
    for (auto& j : running_) {
        if (j->done) continue;
        if (j->stream->cancelled()) {
            finish(*j, "error", "cancelled");
            continue;
        }
        const auto n_prompt = static_cast<int64_t>(j->spec.prompt.size());
        jobs.push_back(j.get());
        if (j->n_fed < n_prompt)
            demands.push_back({n_prompt - j->n_fed, false});
        else
            demands.push_back({1, true});
    }
    if (jobs.empty()) return;
    const std::vector<int64_t> plan = engine::plan_step(demands, options_.n_batch);

    std::vector<engine::BatchToken> batch;
    struct Rows {
        Job* job;
        int64_t first_pos;  // position of the first token fed
        int64_t n;          // tokens fed
        size_t first_row;   // first logits row
        size_t n_rows;
    };
    std::vector<Rows> rows;
    size_t n_rows = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
        if (plan[i] == 0) continue;
        Job& j = *jobs[i];
        const auto n_prompt = static_cast<int64_t>(j.spec.prompt.size());
        Rows r{&j, j.n_fed, plan[i], n_rows, 0};
        for (int64_t k = 0; k < plan[i]; ++k) {
            const int64_t pos = j.n_fed + k;
            const int32_t tok = pos < n_prompt ? j.spec.prompt[pos] : j.last_token;
            const bool want = pos >= n_prompt - 1 || j.spec.prompt_logprobs;
            batch.push_back({j.slot->seq, tok, static_cast<int32_t>(pos), want});
            j.slot->cached.push_back(tok);
            if (want) ++r.n_rows;
        }
        n_rows += r.n_rows;
        rows.push_back(r);
    }
    std::span<const float> logits;
    try {
        logits = model_.decode(batch);
    } catch (const std::exception& e) {
        for (const Rows& r : rows) {
            r.job->slot->cached.clear();
            model_.truncate(r.job->slot->seq, 0);
            finish(*r.job, "error", std::string("decode failed: ") + e.what());
        }
        return;
    }
    const auto n_vocab = static_cast<size_t>(model_.n_vocab());
    for (const Rows& r : rows) {
        Job& j = *r.job;
        const auto n_prompt = static_cast<int64_t>(j.spec.prompt.size());
        j.n_fed += r.n;
        const auto row = [&](size_t k) { return logits.subspan((r.first_row + k) * n_vocab, n_vocab); };
        if (j.spec.prompt_logprobs && r.first_pos < n_prompt) {
            for (size_t k = 0; k < r.n_rows; ++k) {
                const int64_t next = r.first_pos + static_cast<int64_t>(k) + 1;
                if (next < n_prompt) j.prompt_lp[next] = token_logprob(row(k), j.spec.prompt[next], j.spec.top_logprobs);
            }
        }
        if (j.n_fed >= n_prompt && r.n_rows > 0) sample(j, row(r.n_rows - 1));
    }
}

void EngineLoop::sample(Job& job, std::span<const float> logits) {
    const auto n_prompt = static_cast<int64_t>(job.spec.prompt.size());
    if (job.generated >= job.spec.max_tokens || n_prompt + job.generated >= options_.n_ctx) {
        finish(job, "length");
        return;
    }
    const int32_t tok = job.sampler.sample(logits);
    if (tokenizer_.is_eog(tok)) {
        finish(job, "stop");
        return;
    }
    const auto now = Clock::now();
    if (job.last_token_at)
        metrics_.inter_token_latency.observe(std::chrono::duration<double>(now - *job.last_token_at).count());
    else
        metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - job.arrived).count());
    job.last_token_at = now;
    ++metrics_.generated_tokens;
    job.sampler.accept(tok);
    ++job.generated;
    job.last_token = tok;
    job.pending_tokens.push_back(job.spec.logprobs ? token_logprob(logits, tok, job.spec.top_logprobs) : TokenLogprob{tok, 0, {}});
    job.held += job.decoder.push(tok);

    // The earliest stop string in the text not yet sent ends the job there.
    size_t cut = std::string::npos;
    for (const std::string& s : job.spec.stop) cut = std::min(cut, job.held.find(s));
    if (cut != std::string::npos) {
        job.held.resize(cut);
        job.stop_matched = true;
        finish(job, "stop");
        return;
    }
    if (job.generated >= job.spec.max_tokens || n_prompt + job.generated >= options_.n_ctx) {
        finish(job, "length");
        return;
    }
    emit(job, false);
}

void EngineLoop::emit(Job& job, bool final) {
    JobEvent e;
    e.choice = job.choice;
    const size_t keep = final ? 0 : stop_prefix_suffix(job.held, job.spec.stop);
    e.text = job.held.substr(0, job.held.size() - keep);
    job.held.erase(0, job.held.size() - keep);
    if (!final && e.text.empty() && job.pending_tokens.empty()) return;
    e.tokens = std::move(job.pending_tokens);
    job.pending_tokens.clear();
    job.stream->push(std::move(e));
}

void EngineLoop::finish(Job& job, const std::string& reason, const std::string& error) {
    if (job.done) return;
    job.done = true;
    if (reason == "error") {
        // A cancelled or failed job frees its blocks: its text was never delivered.
        if (job.slot) {
            model_.truncate(job.slot->seq, 0);
            job.slot->cached.clear();
        }
        job.stream->push(error_event(job.choice, error));
        return;
    }
    JobEvent e;
    e.choice = job.choice;
    if (!job.stop_matched) job.held += job.decoder.flush();
    e.text = std::move(job.held);
    e.tokens = std::move(job.pending_tokens);
    e.done = true;
    e.finish_reason = reason;
    e.prompt_tokens = static_cast<int64_t>(job.spec.prompt.size());
    e.completion_tokens = job.generated;
    e.cached_tokens = job.cached;
    e.prompt_logprobs = std::move(job.prompt_lp);
    job.stream->push(std::move(e));
}

void EngineLoop::release_finished() {
    for (auto it = running_.begin(); it != running_.end();) {
        if ((*it)->done) {
            if ((*it)->slot) (*it)->slot->job = nullptr;
            it = running_.erase(it);
            --n_running_;
        } else {
            ++it;
        }
    }
}

void EngineLoop::update_gauges() {
    metrics_.running_sequences = static_cast<int64_t>(running_.size());
    // From the cache's free list, so blocks that slots share through a fork count once.
    metrics_.kv_blocks_used = metrics_.kv_blocks_total.load() - model_.n_free_blocks();
}

}  // namespace deskside::server
