#include "backends/cpu/thread_pool.h"

#include <chrono>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include <sys/resource.h>

namespace deskside::backends::cpu {

ThreadPool::ThreadPool(int n_threads, int spin_us)
    : n_threads_(n_threads < 1 ? 1 : n_threads), spin_us_(spin_us), shares_(static_cast<size_t>(n_threads_)) {
    for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (std::thread& w : workers_) w.join();
}

namespace {

// Times this thread was switched out while it could still run.
long involuntary_switches() {
    rusage usage{};
    if (getrusage(RUSAGE_THREAD, &usage) != 0) return 0;
    return usage.ru_nivcsw;
}

}  // namespace

ThreadPool::SpinGate::SpinGate() : preemptions_(involuntary_switches()) {}

bool ThreadPool::SpinGate::open() {
    if (++waits_ % kSpinCheckWaits == 0) {
        const long now = involuntary_switches();
        open_ = now - preemptions_ <= kQuietPreemptions;
        preemptions_ = now;
    }
    return open_;
}

template <class Pred>
bool ThreadPool::spin_until(Pred done, SpinGate& gate) const {
    if (spin_us_ <= 0 || !gate.open()) return done();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
    for (;;) {
        // Reading the clock costs ~20 ns; polling the flag a few times in between keeps the
        // reaction time well under a microsecond.
        for (int i = 0; i < 16; ++i) {
            if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
        if (std::chrono::steady_clock::now() >= deadline) return done();
    }
}

int64_t ThreadPool::take(int share, End end) {
    std::atomic<uint64_t>& s = shares_[static_cast<size_t>(share)];
    uint64_t v = s.load();
    for (;;) {
        const uint64_t front = v >> 32, back = v & 0xFFFFFFFFu;
        if (front >= back) return -1;
        const bool at_front = end == End::Front;
        const uint64_t rest = at_front ? ((front + 1) << 32) | back : (front << 32) | (back - 1);
        if (s.compare_exchange_weak(v, rest)) return static_cast<int64_t>(at_front ? front : back - 1);
    }
}

void ThreadPool::drain(int thread) {
    if (!contiguous_) {
        for (int64_t task = next_.fetch_add(1); task < n_tasks_; task = next_.fetch_add(1)) (*fn_)(task, thread);
        return;
    }
    for (int64_t task = take(thread, End::Front); task >= 0; task = take(thread, End::Front)) (*fn_)(task, thread);
    // Help the others from the far end of their shares, away from where their owners work.
    for (int i = 1; i < n_threads_; ++i) {
        const int share = (thread + i) % n_threads_;
        for (int64_t task = take(share, End::Back); task >= 0; task = take(share, End::Back)) (*fn_)(task, thread);
    }
}

void ThreadPool::run(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) { start(n_tasks, fn, false); }

void ThreadPool::run_contiguous(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) {
    start(n_tasks, fn, true);
}

void ThreadPool::start(int64_t n_tasks, const std::function<void(int64_t, int)>& fn, bool contiguous) {
    if (n_tasks <= 0) return;
    if (workers_.empty() || n_tasks == 1) {
        for (int64_t task = 0; task < n_tasks; ++task) fn(task, 0);
        return;
    }
    if (contiguous && n_tasks > 0xFFFFFFFF) throw std::length_error("ThreadPool::run_contiguous: more than 2^32 - 1 tasks");
    {
        std::lock_guard lock(mutex_);
        fn_ = &fn;
        n_tasks_ = n_tasks;
        next_.store(0);
        contiguous_ = contiguous;
        if (contiguous) {
            for (int t = 0; t < n_threads_; ++t) {
                const uint64_t front = static_cast<uint64_t>(n_tasks * t / n_threads_);
                const uint64_t back = static_cast<uint64_t>(n_tasks * (t + 1) / n_threads_);
                shares_[static_cast<size_t>(t)].store((front << 32) | back);
            }
        }
        busy_.store(static_cast<int>(workers_.size()));
        generation_.fetch_add(1);
    }
    start_cv_.notify_all();
    drain(0);
    if (!spin_until([this] { return busy_.load() == 0; }, caller_gate_)) {
        std::unique_lock lock(mutex_);
        done_cv_.wait(lock, [this] { return busy_.load() == 0; });
    }
    fn_ = nullptr;
}

void ThreadPool::worker(int thread) {
    uint64_t seen = 0;
    SpinGate gate;
    for (;;) {
        if (!spin_until([&] { return stop_.load() || generation_.load() != seen; }, gate)) {
            std::unique_lock lock(mutex_);
            start_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
        }
        if (stop_.load()) return;
        seen = generation_.load();
        drain(thread);
        if (busy_.fetch_sub(1) == 1) {
            // Only the last worker wakes the caller. Taking the lock orders this decrement before
            // or after the caller's check in done_cv_.wait, so the notification cannot fall
            // between its check and its sleep.
            { std::lock_guard lock(mutex_); }
            done_cv_.notify_one();
        }
    }
}

int physical_cores() {
    // Each logical CPU lists its (package, core) in /proc/cpuinfo; distinct pairs are cores.
    std::ifstream in("/proc/cpuinfo");
    std::set<std::pair<std::string, std::string>> cores;
    std::string line, package = "0";
    while (std::getline(in, line)) {
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
        if (line.rfind("physical id", 0) == 0) package = value;
        if (line.rfind("core id", 0) == 0) cores.emplace(package, value);
    }
    if (!cores.empty()) return static_cast<int>(cores.size());
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace deskside::backends::cpu
