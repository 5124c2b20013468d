#include "backends/cpu/thread_pool.h"

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace deskside::backends::cpu {

ThreadPool::ThreadPool(int n_threads, int spin_us) : n_threads_(n_threads < 1 ? 1 : n_threads), spin_us_(spin_us) {
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

template <class Pred>
bool ThreadPool::spin_until(Pred done) const {
    if (spin_us_ <= 0) return done();
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

void ThreadPool::drain(int thread) {
    for (int64_t task = next_.fetch_add(1); task < n_tasks_; task = next_.fetch_add(1)) (*fn_)(task, thread);
}

void ThreadPool::run(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) {
    if (n_tasks <= 0) return;
    if (workers_.empty() || n_tasks == 1) {
        for (int64_t task = 0; task < n_tasks; ++task) fn(task, 0);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        fn_ = &fn;
        n_tasks_ = n_tasks;
        next_.store(0);
        busy_.store(static_cast<int>(workers_.size()));
        generation_.fetch_add(1);
    }
    start_cv_.notify_all();
    drain(0);
    if (!spin_until([this] { return busy_.load() == 0; })) {
        std::unique_lock lock(mutex_);
        done_cv_.wait(lock, [this] { return busy_.load() == 0; });
    }
    fn_ = nullptr;
}

void ThreadPool::worker(int thread) {
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until([&] { return stop_.load() || generation_.load() != seen; })) {
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
