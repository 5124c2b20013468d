#include "engine/engine_loop.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "engine/grammar.h"
#include "engine/scheduler.h"

namespace deskside::engine {

using Clock = std::chrono::steady_clock;

struct EngineLoop::Sequence {
    int32_t id = 0;
    std::vector<int32_t> cached;  // tokens whose KV this sequence holds
    struct Job* job = nullptr;
    uint64_t last_used = 0;
};

struct EngineLoop::Job {
    Job(JobSpec s, std::shared_ptr<RequestStream> st, size_t c, int64_t n_vocab,
        const std::shared_ptr<const GrammarVocab>& vocab)
        : spec(std::move(s)), stream(std::move(st)), choice(c), sampler(spec.sampling, n_vocab) {
        for (const int32_t t : spec.prompt) sampler.accept(t, false);
        if (spec.grammar && spec.grammar_trigger.empty()) matcher = std::make_unique<GrammarMatcher>(spec.grammar, vocab);
        if (spec.grammar && !spec.grammar_trigger.empty()) this->vocab = vocab;
    }
    JobSpec spec;
    std::shared_ptr<RequestStream> stream;
    size_t choice;
    Sampler sampler;
    std::unique_ptr<GrammarMatcher> matcher;  // with spec.grammar (a lazy one: once triggered)
    std::shared_ptr<const GrammarVocab> vocab;  // a lazy grammar's, until it is triggered
    std::string trigger_tail;  // a lazy grammar's: the generated text's last bytes, to find the trigger
    Sequence* seq = nullptr;
    std::vector<int32_t> generated;
    int64_t n_fed = 0;   // positions in the KV cache
    int64_t cached = 0;  // prompt positions reused at the first admission
    bool admitted = false;
    bool done = false;
    bool prompt_lp_sent = false;
    std::vector<std::optional<TokenLogprob>> prompt_lp;
    uint64_t admitted_at = 0;
    Clock::time_point arrived = Clock::now();
    std::optional<Clock::time_point> last_token_at;

    int64_t n_prompt() const { return static_cast<int64_t>(spec.prompt.size()); }
    int64_t n_total() const { return n_prompt() + static_cast<int64_t>(generated.size()); }
    int32_t token_at(int64_t pos) const { return pos < n_prompt() ? spec.prompt[pos] : generated[pos - n_prompt()]; }
    bool at_length(int64_t n_ctx) const {
        return (spec.max_tokens >= 0 && static_cast<int64_t>(generated.size()) >= spec.max_tokens) || n_total() >= n_ctx;
    }
};

EngineLoop::EngineLoop(Model& model, const models::Tokenizer& tokenizer, EngineLoopOptions options, LoopStats* stats)
    : model_(model),
      tokenizer_(tokenizer),
      options_(options),
      stats_(stats ? *stats : own_stats_),
      block_size_(model.kv_block_size()) {
    if (options_.max_running < 1 || options_.n_batch < 1 || options_.n_ctx < 1 || options_.max_queue < 0)
        throw std::invalid_argument("engine loop: max_running, n_batch and n_ctx must be >= 1, max_queue >= 0");
    if (options_.n_ctx > model_.kv_positions())
        throw std::invalid_argument("engine loop: a sequence of " + std::to_string(options_.n_ctx) +
                                    " positions does not fit the KV cache (" + std::to_string(model_.kv_positions()) + ")");
    stats_.kv_blocks_total = model_.kv_positions() / block_size_;
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

std::shared_ptr<RequestStream> EngineLoop::submit(std::vector<JobSpec> jobs) {
    std::vector<OutputOptions> outputs;
    for (const JobSpec& j : jobs) outputs.push_back({j.stop, j.logprobs, j.top_logprobs});
    auto stream = std::make_shared<RequestStream>(tokenizer_, std::move(outputs));
    std::shared_ptr<const GrammarVocab> vocab;
    for (const JobSpec& j : jobs)
        if (j.grammar) {
            // The vocabulary's trie is built once, by the first request that needs it.
            std::call_once(vocab_once_, [&] { vocab_ = std::make_shared<const GrammarVocab>(tokenizer_); });
            vocab = vocab_;
        }
    // More jobs than the queue holds can never be admitted: a bad request, not a busy server.
    // (--queue 0 refuses every request as a busy server would; tests use it to provoke the 503.)
    if (options_.max_queue > 0 && static_cast<int64_t>(jobs.size()) > options_.max_queue)
        throw std::invalid_argument("the request asks for " + std::to_string(jobs.size()) +
                                    " completions (prompts x n) and the queue holds at most " +
                                    std::to_string(options_.max_queue) + " (--queue)");
    std::vector<std::unique_ptr<Job>> made;
    for (size_t i = 0; i < jobs.size(); ++i) {
        if (jobs[i].prompt.empty()) throw std::invalid_argument("the prompt has no tokens");
        made.push_back(std::make_unique<Job>(std::move(jobs[i]), stream, i, model_.n_vocab(), vocab));
    }
    {
        std::lock_guard lock(mutex_);
        if (static_cast<int64_t>(waiting_.size() + made.size()) > options_.max_queue)
            throw QueueFull("the request queue is full (" + std::to_string(options_.max_queue) + " waiting)");
        for (auto& j : made) waiting_.push_back(std::move(j));
        stats_.queue_depth = static_cast<int64_t>(waiting_.size());
    }
    cv_.notify_all();
    return stream;
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

namespace {

TokenStep error_step(size_t choice, const std::string& error) {
    TokenStep s;
    s.choice = choice;
    s.done = true;
    s.finish_reason = "error";
    s.error = error;
    return s;
}

}  // namespace

void EngineLoop::run() {
    for (;;) {
        std::string cancel;
        {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running_.empty() || !cancel_reason_.empty(); });
            if (stop_) break;
            cancel.swap(cancel_reason_);
            if (!cancel.empty()) {
                for (auto& j : waiting_) j->stream->push(error_step(j->choice, cancel));
                waiting_.clear();
                stats_.queue_depth = 0;
            }
        }
        if (!cancel.empty()) {
            for (auto& j : running_) finish(*j, "error", cancel);
            release_finished();
        }
        admit();
        if (!running_.empty()) step();
        release_finished();
        update_gauges();
    }
    for (auto& j : running_) finish(*j, "error", "the server is shutting down");
}

bool EngineLoop::make_room(int64_t blocks, const Job* keep) {
    // Idle prefixes go first, least recently used first; the sequences `keep` will run from stay.
    while (model_.n_free_blocks() < blocks) {
        Sequence* victim = nullptr;
        for (auto& s : sequences_) {
            if (s->job || s->cached.empty() || (keep && keep->seq == s.get())) continue;
            if (!victim || s->last_used < victim->last_used) victim = s.get();
        }
        if (!victim) return false;
        model_.truncate(victim->id, 0);
        victim->cached.clear();
    }
    return true;
}

void EngineLoop::admit() {
    for (;;) {
        Job* job = nullptr;
        {
            std::lock_guard lock(mutex_);
            if (waiting_.empty() || static_cast<int64_t>(running_.size()) >= options_.max_running) return;
            job = waiting_.front().get();  // only this thread takes jobs out, so it stays valid
        }
        if (job->stream->cancelled() || job->stream->stopped(job->choice)) {
            std::unique_ptr<Job> taken;
            {
                std::lock_guard lock(mutex_);
                taken = std::move(waiting_.front());
                waiting_.pop_front();
            }
            if (job->stream->cancelled()) {
                job->stream->push(error_step(job->choice, "cancelled"));
                ++stats_.cancelled_sequences;
            }
            continue;
        }
        // What the job feeds: its prompt, and after a preemption the tokens it generated too.
        std::vector<int32_t> tokens = job->spec.prompt;
        tokens.insert(tokens.end(), job->generated.begin(), job->generated.end());

        // Sequences that have never held anything count as idle candidates, up to twice the
        // running limit; beyond that a new job takes over the least recently used idle one.
        if (static_cast<int64_t>(sequences_.size()) < 2 * options_.max_running) {
            bool have_empty = false;
            for (auto& s : sequences_) have_empty |= !s->job && s->cached.empty();
            if (!have_empty) {
                auto s = std::make_unique<Sequence>();
                s->id = static_cast<int32_t>(sequences_.size());
                sequences_.push_back(std::move(s));
            }
        }
        std::vector<CachedPrefix> view;
        for (auto& s : sequences_) view.push_back({&s->cached, s->job == nullptr});
        PrefixChoice choice = choose_prefix(view, tokens);
        if (choice.target < 0) return;  // every sequence runs a job (cannot happen below max_running)
        if (job->spec.prompt_logprobs || job->spec.embed) choice = {choice.target, -1, 0};
        Sequence* target = sequences_[choice.target].get();
        Sequence* source = choice.source >= 0 ? sequences_[choice.source].get() : nullptr;

        // Blocks for every position the job may reach before the next admission decision: the
        // rest of its tokens and the first one it generates.
        const int64_t need = blocks_to_grow(choice.reuse, static_cast<int64_t>(tokens.size()) + 1, block_size_);
        job->seq = source ? source : target;  // make_room keeps the sequence the job reuses
        if (!make_room(need, job)) {
            job->seq = nullptr;
            if (!running_.empty()) return;  // wait for running jobs to free blocks
            // Alone and still no room: the cache is smaller than the job (n_ctx > cache is refused
            // at construction, so this means a fork source's shared blocks; recompute instead).
            choice = {choice.target, -1, 0};
            source = nullptr;
            make_room(need, nullptr);
        }
        std::unique_ptr<Job> taken;
        {
            std::lock_guard lock(mutex_);
            taken = std::move(waiting_.front());
            waiting_.pop_front();
            stats_.queue_depth = static_cast<int64_t>(waiting_.size());
        }
        if (source) {
            // Blocks are shared, not copied; the first write into a shared block copies it.
            model_.fork(source->id, target->id, choice.reuse);
            target->cached.assign(source->cached.begin(), source->cached.begin() + choice.reuse);
        } else {
            model_.truncate(target->id, choice.reuse);
            target->cached.resize(static_cast<size_t>(choice.reuse));
        }
        target->job = job;
        target->last_used = ++clock_;
        job->seq = target;
        job->n_fed = choice.reuse;
        job->admitted_at = clock_;
        if (!job->admitted) {
            job->admitted = true;
            job->cached = choice.reuse;
            if (job->spec.prompt_logprobs) job->prompt_lp.resize(job->spec.prompt.size());
            stats_.prompt_tokens += job->spec.prompt.size();
            stats_.cached_prompt_tokens += static_cast<uint64_t>(choice.reuse);
        }
        running_.push_back(std::move(taken));
        ++n_running_;
        if (job->spec.max_tokens == 0 && !job->spec.prompt_logprobs) finish(*job, "length");
    }
}

void EngineLoop::preempt(Job& job) {
    model_.truncate(job.seq->id, 0);
    job.seq->cached.clear();
    job.seq->job = nullptr;
    job.seq = nullptr;
    job.n_fed = 0;
    ++stats_.preemptions;
    std::unique_ptr<Job> moved;
    for (auto it = running_.begin(); it != running_.end(); ++it)
        if (it->get() == &job) {
            moved = std::move(*it);
            running_.erase(it);
            break;
        }
    --n_running_;
    std::lock_guard lock(mutex_);
    waiting_.push_front(std::move(moved));
    stats_.queue_depth = static_cast<int64_t>(waiting_.size());
}

void EngineLoop::step() {
    std::vector<Job*> embeds;
    for (auto& j : running_) {
        if (j->done) continue;
        if (j->stream->cancelled()) {
            finish(*j, "error", "cancelled");
            ++stats_.cancelled_sequences;
        } else if (j->stream->stopped(j->choice)) {  // the reader has its answer; the KV stays cached
            j->done = true;
        } else if (j->spec.embed) {
            embeds.push_back(j.get());
        }
    }
    for (Job* j : embeds) embed_step(*j);  // may preempt generating jobs (running_ changes)
    std::vector<Job*> jobs;
    for (auto& j : running_)
        if (!j->done) jobs.push_back(j.get());
    std::vector<int64_t> plan;
    for (;;) {
        if (jobs.empty()) return;
        std::vector<SequenceDemand> demands;
        for (const Job* j : jobs) {
            const int64_t pending = j->n_total() - j->n_fed;
            demands.push_back({pending, j->n_fed >= j->n_prompt() && pending == 1 && !j->generated.empty()});
        }
        plan = plan_step(demands, options_.n_batch);
        int64_t need = 0;
        for (size_t i = 0; i < jobs.size(); ++i)
            need += model_.kv_blocks_needed(jobs[i]->seq->id, jobs[i]->n_fed + plan[i]);
        if (make_room(need, nullptr)) break;
        // Out of blocks: the job admitted last gives its blocks back and is recomputed later.
        auto newest = std::max_element(jobs.begin(), jobs.end(), [](const Job* a, const Job* b) {
            return a->admitted_at < b->admitted_at;
        });
        Job* victim = *newest;
        jobs.erase(newest);
        if (jobs.empty()) {
            // Alone, it cannot grow: only possible when n_ctx was sized past the cache.
            finish(*victim, "error", "the KV cache is full");
            return;
        }
        preempt(*victim);
    }

    std::vector<BatchToken> batch;
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
        // A token id the model has no row for fails its own job, not the batch.
        bool bad = false;
        for (int64_t k = 0; k < plan[i] && !bad; ++k) {
            const int32_t tok = j.token_at(j.n_fed + k);
            bad = tok < 0 || tok >= model_.n_vocab();
        }
        if (bad) {
            finish(j, "error", "token id outside the model's vocabulary (" + std::to_string(model_.n_vocab()) + ")");
            continue;
        }
        Rows r{&j, j.n_fed, plan[i], n_rows, 0};
        for (int64_t k = 0; k < plan[i]; ++k) {
            const int64_t pos = j.n_fed + k;
            const int32_t tok = j.token_at(pos);
            const bool want = pos >= j.n_total() - 1 || (j.spec.prompt_logprobs && pos < j.n_prompt());
            batch.push_back({j.seq->id, tok, static_cast<int32_t>(pos), want});
            j.seq->cached.push_back(tok);
            if (want) ++r.n_rows;
        }
        n_rows += r.n_rows;
        rows.push_back(r);
    }
    if (batch.empty()) return;
    std::span<const float> logits;
    try {
        logits = model_.decode(batch);
    } catch (const std::exception& e) {
        for (const Rows& r : rows) {
            r.job->seq->cached.clear();
            model_.truncate(r.job->seq->id, 0);
            finish(*r.job, "error", std::string("decode failed: ") + e.what());
        }
        return;
    }
    const auto n_vocab = static_cast<size_t>(model_.n_vocab());
    for (const Rows& r : rows) {
        Job& j = *r.job;
        j.n_fed += r.n;
        const auto row = [&](size_t k) { return logits.subspan((r.first_row + k) * n_vocab, n_vocab); };
        // Not again after a preemption's recompute: the entries went out with the first token.
        if (j.spec.prompt_logprobs && !j.prompt_lp_sent && r.first_pos < j.n_prompt()) {
            // The rows are gone after this step: copied for the reader to score while its budget
            // lasts (RequestStream::row_room), scored here beyond it.
            TokenStep rows_step;
            rows_step.choice = j.choice;
            rows_step.prompt_tokens = j.n_prompt();
            rows_step.cached_tokens = j.cached;
            int64_t room = j.stream->row_room(static_cast<int64_t>(n_vocab));
            for (size_t k = 0; k < r.n_rows; ++k) {
                const int64_t next = r.first_pos + static_cast<int64_t>(k) + 1;
                if (next >= j.n_prompt()) continue;
                const int32_t token = j.spec.prompt[next];
                if (room-- > 0)
                    rows_step.prompt_rows.push_back({next, token, std::vector<float>(row(k).begin(), row(k).end())});
                else
                    j.prompt_lp[next] = token_logprob(row(k), token, j.spec.top_logprobs);
            }
            if (!rows_step.prompt_rows.empty()) j.stream->push(std::move(rows_step));
        }
        if (j.n_fed >= j.n_total() && r.n_rows > 0) sample(j, row(r.n_rows - 1));
    }
}

void EngineLoop::embed_step(Job& job) {
    // The whole input in one Model::embed (which splits it into n_batch steps itself): pooling
    // needs every position, and an embedding has no tokens to stream meanwhile.
    const std::vector<int32_t>& tokens = job.spec.prompt;
    for (const int32_t t : tokens)
        if (t < 0 || t >= model_.n_vocab()) {
            finish(job, "error", "token id outside the model's vocabulary (" + std::to_string(model_.n_vocab()) + ")");
            return;
        }
    const int64_t need = blocks_to_grow(0, job.n_prompt(), block_size_);
    if (!make_room(need, &job)) {
        // Generating jobs give their blocks back, newest first, until the input fits.
        std::vector<Job*> victims;
        for (auto& r : running_)
            if (!r->done && r.get() != &job && !r->spec.embed) victims.push_back(r.get());
        std::sort(victims.begin(), victims.end(), [](const Job* a, const Job* b) { return a->admitted_at > b->admitted_at; });
        for (Job* v : victims) {
            if (make_room(need, &job)) break;
            preempt(*v);
        }
    }
    TokenStep s;
    s.choice = job.choice;
    s.prompt_tokens = job.n_prompt();
    try {
        s.embedding = embed_sequence(model_, job.seq->id, tokens, job.spec.pooling);
    } catch (const std::exception& e) {
        finish(job, "error", std::string("embedding failed: ") + e.what());
        return;
    }
    job.seq->cached = tokens;  // the same KV a decode leaves: a later prompt may reuse it
    job.n_fed = job.n_prompt();
    job.done = true;
    s.done = true;
    s.finish_reason = "stop";
    job.stream->push(std::move(s));
}

void EngineLoop::sample(Job& job, std::span<const float> logits) {
    if (job.at_length(options_.n_ctx)) {
        finish(job, "length");
        return;
    }
    std::span<const float> row = logits;
    if (job.matcher) {
        // Logprobs stay those of the model (`logits`); only the draw sees the mask.
        masked_.assign(logits.begin(), logits.end());
        job.matcher->apply(masked_);
        row = masked_;
    }
    int32_t tok = job.sampler.sample(row);
    if (job.vocab && !tokenizer_.is_eog(tok)) {
        // A lazy grammar not yet triggered: a token that completes the trigger starts it, and one
        // whose bytes after the trigger it rejects is banned and the draw repeated.
        const std::string& trigger = job.spec.grammar_trigger;
        for (int tries = 0;; ++tries) {
            const std::string window = job.trigger_tail + job.vocab->text(tok);
            const size_t at = window.find(trigger);
            if (at == std::string::npos) {
                job.trigger_tail = window.substr(window.size() - std::min(window.size(), trigger.size() - 1));
                break;
            }
            auto matcher = std::make_unique<GrammarMatcher>(job.spec.grammar, job.vocab);
            if (matcher->accept_bytes(std::string_view(window).substr(at + trigger.size()))) {
                job.matcher = std::move(matcher);
                job.vocab.reset();
                break;
            }
            if (tries == 8) {
                finish(job, "error", "no token can continue the required format");
                return;
            }
            if (row.data() != masked_.data()) masked_.assign(logits.begin(), logits.end());
            masked_[static_cast<size_t>(tok)] = -std::numeric_limits<float>::infinity();
            row = masked_;
            tok = job.sampler.sample(row);
            if (tokenizer_.is_eog(tok)) break;
        }
    } else if (job.matcher && !job.matcher->accept(tok)) {
        // Every token was masked (or sampling overrode the mask with a bias): no valid continuation.
        finish(job, "error", "no token can continue the required format");
        return;
    }
    if (tokenizer_.is_eog(tok)) {
        finish(job, "stop");
        return;
    }
    const auto now = Clock::now();
    if (job.last_token_at)
        stats_.observe_inter_token(std::chrono::duration<double>(now - *job.last_token_at).count());
    else
        stats_.observe_first_token(std::chrono::duration<double>(now - job.arrived).count());
    job.last_token_at = now;
    ++stats_.generated_tokens;
    job.sampler.accept(tok);
    job.generated.push_back(tok);

    TokenStep s;
    s.choice = job.choice;
    s.token = tok;
    s.prompt_tokens = job.n_prompt();
    s.cached_tokens = job.cached;
    if (job.spec.logprobs) {
        if (job.stream->row_room(static_cast<int64_t>(logits.size())) == 0)
            s.scored = token_logprob(logits, tok, job.spec.top_logprobs);
        else
            s.logits.assign(logits.begin(), logits.end());
    }
    if (!job.prompt_lp_sent) {
        s.prompt_logprobs = std::move(job.prompt_lp);
        job.prompt_lp_sent = true;
    }
    if (job.at_length(options_.n_ctx)) {
        job.done = true;
        s.done = true;
        s.finish_reason = "length";
    }
    job.stream->push(std::move(s));
}

void EngineLoop::finish(Job& job, const std::string& reason, const std::string& error) {
    if (job.done) return;
    job.done = true;
    if (reason == "error") {
        // A cancelled or failed job frees its blocks: its text was never delivered.
        if (job.seq) {
            model_.truncate(job.seq->id, 0);
            job.seq->cached.clear();
        }
        job.stream->push(error_step(job.choice, error));
        return;
    }
    TokenStep s;
    s.choice = job.choice;
    s.done = true;
    s.finish_reason = reason;
    s.prompt_tokens = job.n_prompt();
    s.cached_tokens = job.cached;
    if (!job.prompt_lp_sent) {
        s.prompt_logprobs = std::move(job.prompt_lp);
        job.prompt_lp_sent = true;
    }
    job.stream->push(std::move(s));
}

void EngineLoop::release_finished() {
    for (auto it = running_.begin(); it != running_.end();) {
        if ((*it)->done) {
            if ((*it)->seq) {
                (*it)->seq->job = nullptr;
                (*it)->seq->last_used = ++clock_;
            }
            it = running_.erase(it);
            --n_running_;
        } else {
            ++it;
        }
    }
}

void EngineLoop::update_gauges() {
    stats_.running_sequences = static_cast<int64_t>(running_.size());
    // From the cache's free list, so blocks that sequences share through a fork count once.
    stats_.kv_blocks_used = stats_.kv_blocks_total.load() - model_.n_free_blocks();
}

}  // namespace deskside::engine
