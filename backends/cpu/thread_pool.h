// A fixed set of worker threads that run one parallel loop at a time for the CPU backend.
//
// The caller thread takes part in every loop, so a pool of n threads starts n - 1 workers.
// Tasks are handed out by atomic counters (one for run, one per thread's share for
// run_contiguous); which thread runs a task never changes what the task computes, so results do
// not depend on the thread count.
//
// Idle threads (workers waiting for a loop, the caller waiting for the last worker) spin for a
// bounded time before sleeping on a condition variable: a futex wake-up costs each of the ~200
// loops of a decoded token several microseconds on a quiet machine, but on an oversubscribed
// one a spinning thread takes the core that the thread with work needs (docs/PERFORMANCE.md has
// both measurements). So each thread spins only while the machine looks uncrowded: every
// kSpinCheckWaits waits it reads its count of involuntary context switches (getrusage), and a
// thread that the scheduler preempted more than kQuietPreemptions times in that window sleeps at
// once through the next one. (Measured on 2 cores, 64-wait windows of a decode: alone, 98 % of
// windows see 0 or 1 preemptions; beside a second 2-thread decode, 98 % see 3 or more.)
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deskside::backends::cpu {

class ThreadPool {
   public:
    // spin_us: how long an idle thread polls before it sleeps (0: sleep at once).
    explicit ThreadPool(int n_threads, int spin_us = kDefaultSpinUs);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    // Runs fn(task, thread) for task in [0, n_tasks) and returns when all are done. `thread` is
    // in [0, size()) and identifies per-thread scratch. Not reentrant.
    void run(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);
    // Like run, but the tasks are cut into size() contiguous shares: thread t runs share t's
    // tasks in ascending order, then takes the last remaining tasks of the other shares. When
    // adjacent tasks read adjacent memory (a decode matvec's weight rows), each thread streams
    // one long ascending range, which the hardware prefetchers follow at full DRAM speed
    // (interleaved small tasks cost 14 % of decode speed, docs/PERFORMANCE.md session 6), and a
    // thread that starts late still gets its work shared.
    void run_contiguous(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);

    // 100 us: on a quiet 2-core machine, tg128 +1-14 % over sleeping at once (docs/PERFORMANCE.md,
    // session 6).
    static constexpr int kDefaultSpinUs = 100;
    static constexpr int kSpinCheckWaits = 64;
    static constexpr long kQuietPreemptions = 1;

   private:
    // Per thread: whether its waits may spin now (see the top of this file).
    class SpinGate {
       public:
        SpinGate();
        bool open();

       private:
        int waits_ = 0;
        long preemptions_ = 0;
        bool open_ = true;
    };

    void worker(int thread);
    // Polls `done` for up to spin_us_ if `gate` is open; true if it became true.
    template <class Pred>
    bool spin_until(Pred done, SpinGate& gate) const;
    void start(int64_t n_tasks, const std::function<void(int64_t, int)>& fn, bool contiguous);
    void drain(int thread);
    // run_contiguous: the next task at the front or at the back of a share; -1 once it is empty.
    enum class End { Front, Back };
    int64_t take(int share, End end);

    int n_threads_;
    int spin_us_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable start_cv_;
    std::condition_variable done_cv_;
    // generation_ and stop_ change under mutex_, so that no sleeper misses a change; busy_ drops
    // without it (the worker then takes the lock, see worker()). Spinners read all three bare.
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> busy_{0};
    std::atomic<bool> stop_{false};
    const std::function<void(int64_t, int)>* fn_ = nullptr;
    int64_t n_tasks_ = 0;
    std::atomic<int64_t> next_{0};
    bool contiguous_ = false;
    // run_contiguous: share t's remaining tasks [front, back) as front << 32 | back.
    std::vector<std::atomic<uint64_t>> shares_;
    SpinGate caller_gate_;  // the thread calling run(), waiting for the workers
};

// The number of physical cores (hyper-threads counted once), at least 1.
int physical_cores();

}  // namespace deskside::backends::cpu
