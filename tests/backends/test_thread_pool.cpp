// backends/cpu/thread_pool.h: every task of a loop runs exactly once, whatever the thread count,
// sleeping or spinning; run_contiguous gives each thread its own share first, in ascending order,
// and others take only the end of a share.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/cpu/thread_pool.h"

namespace cpu = deskside::backends::cpu;

namespace {

struct Record {
    std::vector<std::atomic<int>> runs;    // per task: how many times it ran
    std::vector<std::atomic<int>> thread;  // per task: the thread that ran it
    std::mutex mutex;
    std::vector<std::vector<int64_t>> order;  // per thread: tasks in the order it ran them

    Record(int64_t n_tasks, int n_threads) : runs(n_tasks), thread(n_tasks), order(n_threads) {}

    void run(int64_t task, int t) {
        runs[task].fetch_add(1);
        thread[task].store(t);
        std::lock_guard lock(mutex);
        order[t].push_back(task);
    }
};

}  // namespace

TEST_CASE("thread pool: every task runs exactly once, interleaved or contiguous", "[cpu]") {
    for (int spin_us : {0, 20}) {
        for (int n_threads : {1, 2, 3, 4}) {
            cpu::ThreadPool pool(n_threads, spin_us);
            for (int64_t n_tasks : {1, 2, 3, 5, 7, 64, 1000}) {
                for (bool contiguous : {false, true}) {
                    for (int repeat = 0; repeat < 20; ++repeat) {
                        Record rec(n_tasks, n_threads);
                        const auto fn = [&](int64_t task, int t) {
                            REQUIRE(t >= 0);
                            REQUIRE(t < n_threads);
                            rec.run(task, t);
                        };
                        if (contiguous)
                            pool.run_contiguous(n_tasks, fn);
                        else
                            pool.run(n_tasks, fn);
                        int64_t wrong = 0;
                        for (int64_t i = 0; i < n_tasks; ++i) wrong += rec.runs[i].load() != 1;
                        INFO("spin " << spin_us << ", threads " << n_threads << ", tasks " << n_tasks
                                     << (contiguous ? ", contiguous" : ", interleaved"));
                        REQUIRE(wrong == 0);
                    }
                }
            }
        }
    }
}

TEST_CASE("thread pool: run_contiguous runs a share's front in order on its owner, others take its end",
          "[cpu]") {
    constexpr int kThreads = 3;
    constexpr int64_t kTasks = 300;
    cpu::ThreadPool pool(kThreads, 0);
    for (int repeat = 0; repeat < 20; ++repeat) {
        Record rec(kTasks, kThreads);
        pool.run_contiguous(kTasks, [&](int64_t task, int t) {
            // Uneven work, so that threads finish their shares at different times and help.
            if (task % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
            rec.run(task, t);
        });
        for (int share = 0; share < kThreads; ++share) {
            const int64_t front = kTasks * share / kThreads, back = kTasks * (share + 1) / kThreads;
            // The owner's tasks of its share: front, front + 1, ... in the order it ran them.
            std::vector<int64_t> own;
            for (int64_t task : rec.order[share])
                if (task >= front && task < back) own.push_back(task);
            for (size_t i = 0; i < own.size(); ++i) REQUIRE(own[i] == front + static_cast<int64_t>(i));
            // Every other task of the share ran on another thread, after the owner's prefix.
            for (int64_t task = front + static_cast<int64_t>(own.size()); task < back; ++task)
                REQUIRE(rec.thread[task].load() != share);
            // A helper takes a share's tasks from its end: descending in the helper's order.
            for (int t = 0; t < kThreads; ++t) {
                if (t == share) continue;
                int64_t last = back;
                for (int64_t task : rec.order[t]) {
                    if (task < front || task >= back) continue;
                    REQUIRE(task < last);
                    last = task;
                }
            }
        }
    }
}
