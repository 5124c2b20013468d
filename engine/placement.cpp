#include "engine/placement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "engine/scratch.h"

namespace deskside::engine {
namespace {

// Bytes a tensor takes once placed: vectors (norms, biases) are converted to F32 at load
// (engine/weights.cpp), matrices keep the file's bytes.
uint64_t placed_bytes(const models::Tensor& t) {
    if (t.shape.size() == 1) return static_cast<uint64_t>(t.shape[0]) * sizeof(float);
    return t.n_bytes;
}

// Whether a per-layer tensor belongs to the mixture-of-experts block (router, experts, their biases).
bool is_expert_tensor(const std::string& name) {
    return name.find(".ffn_gate_inp.") != std::string::npos || name.find("_exps.") != std::string::npos;
}

// The layer index of "blk.<il>.<name>", or -1.
int64_t layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    const size_t dot = name.find('.', 4);
    // More digits than an int64 holds is no layer either (and must not overflow).
    if (dot == std::string::npos || dot == 4 || dot > 4 + 18) return -1;
    int64_t il = 0;
    for (size_t i = 4; i < dot; ++i) {
        if (name[i] < '0' || name[i] > '9') return -1;
        il = il * 10 + (name[i] - '0');
    }
    return il;
}

// Each entry's share of its device's free memory (entries with the same name share one pool).
std::vector<uint64_t> budgets(std::span<const PlanDevice> devices) {
    std::map<std::string, uint64_t> count;
    for (const PlanDevice& d : devices) ++count[d.name];
    std::vector<uint64_t> out;
    for (const PlanDevice& d : devices) out.push_back(d.free_memory / count[d.name]);
    return out;
}

// Layer il's expert bytes (needs built by hand may leave layer_experts empty: a dense model).
uint64_t expert_bytes(const MemoryNeeds& needs, int64_t il) {
    return il < static_cast<int64_t>(needs.layer_experts.size()) ? needs.layer_experts[il] : 0;
}

std::string layers_text(const DevicePlan& d) {
    if (d.layer_end - d.layer_begin == 1) return "layer " + std::to_string(d.layer_begin);
    return "layers " + std::to_string(d.layer_begin) + "-" + std::to_string(d.layer_end - 1);
}

// The largest context per sequence (a multiple of the block size) that fits `plan`'s layer
// ranges, or 0 when even the weights and scratch do not fit.
int64_t fitting_context(const Plan& plan, const MemoryNeeds& needs, int64_t n_parallel) {
    if (needs.kv_per_position == 0 || n_parallel <= 0) return 0;
    uint64_t positions = UINT64_MAX;
    for (const DevicePlan& d : plan.devices) {
        const uint64_t fixed = d.weight_bytes + d.scratch_bytes;
        if (fixed >= d.free_memory) return 0;
        const uint64_t per_position = needs.kv_per_position * static_cast<uint64_t>(d.layer_end - d.layer_begin);
        positions = std::min(positions, (d.free_memory - fixed) / per_position);
    }
    const uint64_t bs = static_cast<uint64_t>(needs.block_size);
    return static_cast<int64_t>(positions / static_cast<uint64_t>(n_parallel) / bs * bs);
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double b = static_cast<double>(bytes);
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
    return buf;
}

MemoryNeeds memory_needs(const models::ModelInfo& info, const KvCacheConfig& cache, int64_t n_batch) {
    const models::Hparams& hp = info.hparams;
    // A bad file, not a bad flag: a runtime error naming the field (an invalid_argument would be
    // reported as a usage error, "see --help").
    if (hp.n_layer <= 0)
        throw std::runtime_error(info.path + ": " + hp.architecture + ".block_count is " +
                                 std::to_string(hp.n_layer) +
                                 ": the model has no layers to place (a vocabulary-only file?)");
    MemoryNeeds n;
    n.n_layer = hp.n_layer;
    n.layer_weights.assign(hp.n_layer, 0);
    n.layer_experts.assign(hp.n_layer, 0);
    uint64_t token_embd = 0;
    bool has_output = false;
    for (const models::Tensor& t : info.tensors) {
        const int64_t il = layer_of(t.name);
        if (il >= hp.n_layer)
            throw std::invalid_argument(info.path + ": tensor '" + t.name + "' names layer " + std::to_string(il) +
                                        " but the model has " + std::to_string(hp.n_layer));
        if (il >= 0) {
            n.layer_weights[il] += placed_bytes(t);
            if (is_expert_tensor(t.name)) n.layer_experts[il] += placed_bytes(t);
        } else if (t.name == "output.weight" || t.name == "output_norm.weight") {
            n.output += placed_bytes(t);
        } else if (t.name == "rope_freqs.weight" || t.name.starts_with("rope_factors_")) {
            continue;  // read into host memory at load
        } else {
            n.embedding += placed_bytes(t);
        }
        if (t.name == "token_embd.weight") token_embd = placed_bytes(t);
        if (t.name == "output.weight") has_output = true;
    }
    if (!has_output) {
        n.output += token_embd;
        n.tied_head = token_embd;
    }
    // The cache multiplies the file's head counts and sizes by the positions asked for: bounded
    // (4 bytes per element is the widest cache type) before KvCache computes it.
    checked_size({hp.n_head_kv, hp.head_dim + hp.head_dim_v, 4, cache.n_positions + cache.block_size, hp.n_layer},
                 "the KV cache for " + std::to_string(cache.n_positions) + " positions");
    n.layer_kv = KvCache::layer_bytes(hp, cache);
    KvCacheConfig one = cache;
    one.block_size = 1;
    one.n_positions = 1;
    n.kv_per_position = KvCache::layer_bytes(hp, one);
    n.block_size = cache.block_size;
    n.scratch = Scratch::bytes(hp, n_batch, false);
    n.scratch_output = Scratch::bytes(hp, n_batch, true) - n.scratch;
    return n;
}

std::vector<std::string> comma_items(std::string_view text) {
    std::vector<std::string> items;
    size_t start = 0;
    while (true) {
        const size_t comma = text.find(',', start);
        items.emplace_back(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (comma == std::string_view::npos) return items;
        start = comma + 1;
    }
}

SplitSpec parse_split(std::string_view text) {
    SplitSpec s;
    if (text == "auto") return s;
    for (const std::string& item : comma_items(text)) {
        char* end = nullptr;
        const double r = item.empty() ? 0 : std::strtod(item.c_str(), &end);
        if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(r) || r <= 0)
            throw std::invalid_argument("--split: '" + item + "' is not a positive number (expected auto or ratios such as 3,1)");
        s.ratios.push_back(r);
    }
    return s;
}

bool Plan::fits() const {
    return std::all_of(devices.begin(), devices.end(), [](const DevicePlan& d) { return d.fits(); }) &&
           (!host_experts || host_experts->fits());
}

std::string Plan::split_text() const {
    std::string out;
    for (const DevicePlan& d : devices) out += (out.empty() ? "" : ",") + std::to_string(d.layer_end - d.layer_begin);
    return out;
}

Plan plan_placement(const MemoryNeeds& needs, std::span<const PlanDevice> devices, const SplitSpec& split,
                    const ExpertOffload& experts) {
    const size_t n_dev = devices.size();
    const int64_t n_layer = needs.n_layer;
    if (n_dev == 0) throw std::invalid_argument("no devices to place the model on");
    if (static_cast<int64_t>(n_dev) > n_layer)
        throw std::invalid_argument(std::to_string(n_dev) + " devices but the model has only " + std::to_string(n_layer) +
                                    " layers: each device needs at least one");
    if (!split.is_auto() && split.ratios.size() != n_dev)
        throw std::invalid_argument("--split has " + std::to_string(split.ratios.size()) + " ratios for " +
                                    std::to_string(n_dev) + " devices");
    const std::vector<uint64_t> budget = budgets(devices);

    Plan plan;
    for (size_t i = 0; i < n_dev; ++i) {
        DevicePlan d;
        d.name = devices[i].name;
        d.free_memory = budget[i];
        d.embedding = i == 0;
        d.output = i + 1 == n_dev;
        d.scratch_bytes = needs.scratch + (d.output ? needs.scratch_output : 0);
        d.weight_bytes = (d.embedding ? needs.embedding : 0) + (d.output ? needs.output : 0);
        if (d.embedding && d.output) d.weight_bytes -= needs.tied_head;
        plan.devices.push_back(d);
    }

    // Ratios of layers: given, or each device's memory left after its fixed share.
    std::vector<double> ratio = split.ratios;
    if (split.is_auto()) {
        for (const DevicePlan& d : plan.devices)
            ratio.push_back(d.free_memory > d.total_bytes() ? static_cast<double>(d.free_memory - d.total_bytes()) : 0.0);
        if (std::all_of(ratio.begin(), ratio.end(), [](double r) { return r <= 0; })) ratio.assign(n_dev, 1.0);
    }
    double total = 0;
    for (double r : ratio) total += r;

    // Cumulative boundaries, rounded, then nudged so that every device keeps at least one layer.
    double cum = 0;
    int64_t begin = 0;
    for (size_t i = 0; i < n_dev; ++i) {
        cum += ratio[i];
        int64_t end = i + 1 == n_dev ? n_layer : std::llround(static_cast<double>(n_layer) * cum / total);
        end = std::clamp<int64_t>(end, begin + 1, n_layer - static_cast<int64_t>(n_dev - 1 - i));
        DevicePlan& d = plan.devices[i];
        d.layer_begin = begin;
        d.layer_end = end;
        for (int64_t il = begin; il < end; ++il) {
            const bool on_host = il < experts.n_layers;
            d.weight_bytes += needs.layer_weights[il] - (on_host ? expert_bytes(needs, il) : 0);
            if (!on_host) d.expert_bytes += expert_bytes(needs, il);
        }
        d.kv_bytes = needs.layer_kv * static_cast<uint64_t>(end - begin);
        begin = end;
    }
    const int64_t n_host = std::min(experts.n_layers, n_layer);
    uint64_t host_bytes = 0;
    for (int64_t il = 0; il < n_host; ++il) host_bytes += expert_bytes(needs, il);
    if (n_host > 0 && host_bytes > 0) {
        DevicePlan h;
        h.name = experts.host.name;
        h.layer_begin = 0;
        h.layer_end = n_host;
        h.weight_bytes = h.expert_bytes = host_bytes;
        h.scratch_bytes = needs.scratch;
        h.free_memory = experts.host.free_memory;
        plan.host_experts = h;
    }
    return plan;
}

void check_plan(const Plan& plan, const MemoryNeeds& needs, std::span<const PlanDevice> devices, int64_t n_parallel,
                const ExpertOffload& experts) {
    if (plan.fits()) return;
    std::string msg;
    if (plan.host_experts && !plan.host_experts->fits()) {
        const DevicePlan& h = *plan.host_experts;
        msg = "host memory ('" + h.name + "') needs " + format_bytes(h.total_bytes()) + " for the experts of " +
              layers_text(h) + " (--cpu-moe / --n-cpu-moe) but has " + format_bytes(h.free_memory) +
              " free: offload fewer layers' experts (--n-cpu-moe)";
    }
    for (size_t i = 0; i < plan.devices.size(); ++i) {
        const DevicePlan& d = plan.devices[i];
        if (d.fits()) continue;
        msg += (msg.empty() ? "" : "; ") + std::string("device '") + d.name + "' (entry " + std::to_string(i + 1) +
               " of --devices) needs " + format_bytes(d.total_bytes()) + " for " + layers_text(d) + " (weights " +
               format_bytes(d.weight_bytes) + ", KV cache " + format_bytes(d.kv_bytes) + ", scratch " +
               format_bytes(d.scratch_bytes) + ") but has " + format_bytes(d.free_memory) + " free: short by " +
               format_bytes(d.total_bytes() - d.free_memory);
    }
    std::vector<std::string> advice;
    const Plan balanced = plan_placement(needs, devices, SplitSpec{}, experts);
    if (balanced.fits() && balanced.split_text() != plan.split_text())
        advice.push_back("a split that fits: --split " + balanced.split_text());
    const int64_t ctx = fitting_context(plan, needs, n_parallel);
    if (ctx > 0)
        advice.push_back("a context that fits this split: --ctx-size " + std::to_string(ctx) +
                         (n_parallel > 1 ? " (per sequence, " + std::to_string(n_parallel) + " sequences)" : ""));
    if (advice.empty()) {
        msg += ". No split of these devices holds the weights and scratch; add a device or use a smaller quantization";
    } else {
        msg += ". Try " + advice[0];
        if (advice.size() > 1) msg += ", or " + advice[1];
    }
    throw std::runtime_error(msg);
}

}  // namespace deskside::engine
