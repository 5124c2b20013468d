// Server metrics in Prometheus' text exposition format (GET /metrics). HTTP threads count
// requests; the engine loop sets the gauges and observes latencies once per step, so nothing
// here sits on the hot path for longer than an atomic add or a short lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace deskside::server {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
   public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double value);
    // "# HELP", "# TYPE", the _bucket lines (le="+Inf" last), _sum and _count.
    std::string render(const std::string& name, const std::string& help) const;

   private:
    mutable std::mutex mutex_;
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;  // per bound, not cumulative; the last one is +Inf
    double sum_ = 0;
    uint64_t count_ = 0;
};

class Metrics {
   public:
    Metrics();

    void count_request(const std::string& route, int status);
    std::atomic<uint64_t> prompt_tokens{0};
    std::atomic<uint64_t> cached_prompt_tokens{0};
    std::atomic<uint64_t> generated_tokens{0};
    std::atomic<int64_t> queue_depth{0};
    std::atomic<int64_t> running_sequences{0};
    std::atomic<int64_t> kv_blocks_used{0};
    std::atomic<int64_t> kv_blocks_total{0};
    Histogram time_to_first_token;
    Histogram inter_token_latency;

    std::string render() const;

   private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
};

}  // namespace deskside::server
