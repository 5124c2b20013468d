#include "server/metrics.h"

#include <sstream>

namespace deskside::server {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
    std::lock_guard lock(mutex_);
    size_t i = 0;
    while (i < bounds_.size() && value > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += value;
    ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
    std::lock_guard lock(mutex_);
    std::ostringstream out;
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        out << name << "_bucket{le=\"" << bounds_[i] << "\"} " << cumulative << "\n";
    }
    out << name << "_bucket{le=\"+Inf\"} " << count_ << "\n";
    out << name << "_sum " << sum_ << "\n" << name << "_count " << count_ << "\n";
    return out.str();
}

namespace {
const std::vector<double> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

void gauge(std::ostringstream& out, const std::string& name, const std::string& help, const char* type, int64_t value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << value << "\n";
}
}  // namespace

Metrics::Metrics() : time_to_first_token(kLatencyBounds), inter_token_latency(kLatencyBounds) {}

void Metrics::add_route(const std::string& route) {
    std::lock_guard lock(mutex_);
    routes_.insert(route);
}

std::string Metrics::route_label(const std::string& route) const {
    std::lock_guard lock(mutex_);
    return routes_.count(route) ? route : "other";
}

void Metrics::count_request(const std::string& route, int status) {
    // Status codes come from the server, never from the client, so they are a small set.
    std::string label = route_label(route);
    std::lock_guard lock(mutex_);
    ++requests_[{std::move(label), status}];
}

std::string escape_label_value(const std::string& value) {
    std::string out;
    for (const char c : value) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string Metrics::render() const {
    std::ostringstream out;
    out << "# HELP deskside_requests_total HTTP requests by route and status code\n"
           "# TYPE deskside_requests_total counter\n";
    {
        std::lock_guard lock(mutex_);
        for (const auto& [key, n] : requests_)
            out << "deskside_requests_total{route=\"" << escape_label_value(key.first) << "\",status=\"" << key.second
                << "\"} " << n << "\n";
    }
    gauge(out, "deskside_prompt_tokens_total", "prompt tokens received", "counter", static_cast<int64_t>(prompt_tokens));
    gauge(out, "deskside_prompt_tokens_cached_total", "prompt tokens taken from cached KV blocks", "counter",
          static_cast<int64_t>(cached_prompt_tokens));
    gauge(out, "deskside_generated_tokens_total", "tokens generated", "counter", static_cast<int64_t>(generated_tokens));
    gauge(out, "deskside_preemptions_total", "sequences whose KV blocks were taken back to be recomputed later",
          "counter", static_cast<int64_t>(preemptions));
    gauge(out, "deskside_cancelled_sequences_total", "sequences given up by their client (connection closed, Stop)",
          "counter", static_cast<int64_t>(cancelled_sequences));
    gauge(out, "deskside_queue_depth", "sequences waiting for KV cache blocks or a running place", "gauge", queue_depth);
    gauge(out, "deskside_running_sequences", "sequences being prefilled or generated", "gauge", running_sequences);
    gauge(out, "deskside_kv_cache_blocks_used", "KV cache blocks holding positions (running and cached prefixes)", "gauge",
          kv_blocks_used);
    gauge(out, "deskside_kv_cache_blocks_total", "KV cache blocks in all", "gauge", kv_blocks_total);
    out << time_to_first_token.render("deskside_time_to_first_token_seconds", "time from arrival to the first generated token");
    out << inter_token_latency.render("deskside_inter_token_latency_seconds", "time between consecutive generated tokens");
    return out.str();
}

}  // namespace deskside::server
