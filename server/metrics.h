// Server metrics in Prometheus' text exposition format (GET /metrics). HTTP threads count
// requests; the engine loop sets the gauges and observes latencies once per step, so nothing
// here sits on the hot path for longer than an atomic add or a short lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/engine_loop.h"

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

// The engine loop's counters (engine::LoopStats) plus the request counts and latency histograms.
class Metrics : public engine::LoopStats {
   public:
    Metrics();

    // Routes are counted under their template (registered with add_route); anything else under
    // "other", so a client cannot create series.
    void add_route(const std::string& route);
    void count_request(const std::string& route, int status);
    Histogram time_to_first_token;
    Histogram inter_token_latency;
    void observe_first_token(double seconds) override { time_to_first_token.observe(seconds); }
    void observe_inter_token(double seconds) override { inter_token_latency.observe(seconds); }

    std::string render() const;

   private:
    std::string route_label(const std::string& route) const;
    mutable std::mutex mutex_;
    std::set<std::string> routes_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
};

// A label value escaped for the text exposition format: backslash, double quote and newline.
// ref: https://prometheus.io/docs/instrumenting/exposition_formats/ (text format, "label_value")
std::string escape_label_value(const std::string& value);

}  // namespace deskside::server
