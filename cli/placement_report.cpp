#include "cli/placement_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "engine/fit_search.h"

namespace deskside::cli {

using nlohmann::ordered_json;

namespace {

// "24GiB", "24G", "512 MiB", "1048576": binary multiples, as free memory is
// reported.
std::optional<uint64_t> parse_size(const std::string& text) {
    char* end = nullptr;
    const double n = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || !std::isfinite(n) || n < 0) return std::nullopt;
    std::string unit(end);
    unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
    std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    const std::string units[] = {"", "k", "m", "g", "t"};
    for (int u = 0; u < 5; ++u) {
        if (unit != units[u] && unit != units[u] + "ib" && unit != units[u] + "b") continue;
        const double bytes = n * std::pow(1024.0, u);
        if (bytes >= 18e18) return std::nullopt;
        return static_cast<uint64_t>(bytes);
    }
    return std::nullopt;
}

}  // namespace

PlacementFlags read_placement_flags(Args& args) {
    PlacementFlags f;
    f.devices = read_device_flags(args);
    f.ctx = args.int_value("--ctx-size", "-c");
    const auto parallel = args.int_value("--parallel", "-np");
    const auto batch = args.int_value("--batch-size", "-b");
    f.parallel = parallel.value_or(1);
    f.options.n_batch = batch.value_or(f.options.n_batch);
    const auto cache_k = args.value("--cache-type-k");
    const auto cache_v = args.value("--cache-type-v");
    if (f.ctx && *f.ctx < 1) throw UsageError("--ctx-size must be >= 1");
    if (f.parallel < 1) throw UsageError("--parallel must be >= 1");
    if (f.options.n_batch < 1) throw UsageError("--batch-size must be >= 1");
    try {
        if (cache_k) f.options.cache.type_k = engine::parse_cache_type(*cache_k);
        if (cache_v) f.options.cache.type_v = engine::parse_cache_type(*cache_v);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    f.sizing_given = f.ctx || parallel || batch || cache_k || cache_v;
    return f;
}

std::optional<std::vector<uint64_t>> read_free_flag(Args& args) {
    const auto text = args.value("--free");
    if (!text) return std::nullopt;
    std::vector<uint64_t> sizes;
    for (const std::string& item : engine::comma_items(*text)) {
        const auto size = parse_size(item);
        if (!size) throw UsageError("--free: '" + item + "' is not a size (expected e.g. 24GiB, 512MiB or bytes)");
        sizes.push_back(*size);
    }
    return sizes;
}

std::vector<engine::PlanDevice> placement_devices(const PlacementFlags& flags,
                                                  const std::optional<std::vector<uint64_t>>& free) {
    if (!free) return plan_device_list(flags.devices);
    const std::vector<std::string>& names = flags.devices.names;
    if (free->size() != names.size())
        throw UsageError("--free has " + std::to_string(free->size()) + " sizes for " + std::to_string(names.size()) +
                         " --devices entries");
    std::vector<engine::PlanDevice> devices;
    for (size_t i = 0; i < names.size(); ++i) {
        if (names[i].empty()) throw UsageError("--devices: entry " + std::to_string(i + 1) + " is empty");
        devices.push_back({names[i], (*free)[i]});
    }
    return devices;
}

int64_t placement_context(const models::ModelInfo& m, const PlacementFlags& f) {
    const int64_t n_ctx_train = m.hparams.n_ctx_train;
    return f.ctx ? *f.ctx : std::min<int64_t>(n_ctx_train > 0 ? n_ctx_train : 4096, 4096);
}

ordered_json describe_placement(const models::ModelInfo& m, PlacementFlags& f,
                                std::span<const engine::PlanDevice> devices) {
    const int64_t ctx = placement_context(m, f);
    f.options.cache.n_positions = engine::kv_positions(ctx, f.parallel, f.options.cache.block_size);
    engine::MemoryNeeds needs;
    const engine::Plan plan = plan_devices(m, devices, f.devices, f.options, needs);
    const engine::ExpertOffload experts = expert_offload(m, f.devices);
    ordered_json j;
    j["split"] = f.devices.split.is_auto() ? "auto" : "ratios";
    j["layers_per_device"] = plan.split_text();
    j["ctx_size"] = ctx;
    j["parallel"] = f.parallel;
    j["kv_positions"] = f.options.cache.n_positions;
    j["cache_type_k"] = std::string(quant::type_info(f.options.cache.type_k).name);
    j["cache_type_v"] = std::string(quant::type_info(f.options.cache.type_v).name);
    j["batch_size"] = f.options.n_batch;
    const auto device_json = [](const engine::DevicePlan& d) {
        return ordered_json{{"name", d.name},
                            {"layers", {d.layer_begin, d.layer_end}},
                            {"embedding", d.embedding},
                            {"output", d.output},
                            {"weight_bytes", d.weight_bytes},
                            {"expert_bytes", d.expert_bytes},
                            {"kv_bytes", d.kv_bytes},
                            {"scratch_bytes", d.scratch_bytes},
                            {"total_bytes", d.total_bytes()},
                            {"free_bytes", d.free_memory},
                            {"fits", d.fits()}};
    };
    ordered_json list = ordered_json::array();
    for (const engine::DevicePlan& d : plan.devices) list.push_back(device_json(d));
    j["devices"] = list;
    // The experts kept in host memory (--cpu-moe / --n-cpu-moe): their layers,
    // bytes and scratch.
    j["host_experts"] = plan.host_experts ? device_json(*plan.host_experts) : ordered_json(nullptr);
    j["fits"] = plan.fits();
    j["error"] = nullptr;
    try {
        engine::check_plan(plan, needs, devices, f.parallel, experts);
    } catch (const std::runtime_error& e) {
        j["error"] = e.what();
    }
    return j;
}

void print_placement(const ordered_json& p, std::FILE* out) {
    const auto bytes = [](const ordered_json& v) { return engine::format_bytes(v.get<uint64_t>()); };
    std::fprintf(out,
                 "\nplacement:     %s layers per device (%s), context %lld x "
                 "%lld sequences, KV cache %s/%s, batch %lld\n",
                 p["layers_per_device"].get<std::string>().c_str(), p["split"].get<std::string>().c_str(),
                 p["ctx_size"].get<long long>(), p["parallel"].get<long long>(),
                 p["cache_type_k"].get<std::string>().c_str(), p["cache_type_v"].get<std::string>().c_str(),
                 p["batch_size"].get<long long>());
    std::fprintf(out, "  %-10s %-12s %-14s %12s %12s %12s %12s %12s %12s\n", "device", "layers", "holds", "weights",
                 "(experts)", "KV cache", "scratch", "total", "free");
    const auto row = [&](const ordered_json& d, bool host_experts) {
        const long long b = d["layers"][0].get<long long>(), e = d["layers"][1].get<long long>();
        const std::string layers = e - b == 1 ? std::to_string(b) : std::to_string(b) + "-" + std::to_string(e - 1);
        std::string holds = d["embedding"].get<bool>() ? "embd" : "";
        if (d["output"].get<bool>()) holds += holds.empty() ? "output" : "+output";
        if (host_experts) holds = "experts only";
        std::fprintf(out, "  %-10s %-12s %-14s %12s %12s %12s %12s %12s %12s%s\n", d["name"].get<std::string>().c_str(),
                     layers.c_str(), holds.empty() ? "-" : holds.c_str(), bytes(d["weight_bytes"]).c_str(),
                     bytes(d["expert_bytes"]).c_str(), bytes(d["kv_bytes"]).c_str(), bytes(d["scratch_bytes"]).c_str(),
                     bytes(d["total_bytes"]).c_str(), bytes(d["free_bytes"]).c_str(),
                     d["fits"].get<bool>() ? "" : "  DOES NOT FIT");
    };
    for (const auto& d : p["devices"]) row(d, false);
    if (!p["host_experts"].is_null()) row(p["host_experts"], true);
}

ordered_json describe_fit(const models::ModelInfo& m, PlacementFlags& f, std::span<const engine::PlanDevice> devices) {
    ordered_json j;
    j["placement"] = describe_placement(m, f, devices);
    j["fits"] = j["placement"]["fits"];
    const int64_t limit = std::max<int64_t>(m.hparams.n_ctx_train, placement_context(m, f));
    engine::FitQuery q;
    q.devices = devices;
    q.split = f.devices.split;
    q.experts = expert_offload(m, f.devices);
    q.cache = f.options.cache;
    q.n_batch = f.options.n_batch;
    q.n_parallel = f.parallel;
    try {
        j["largest_context"] = engine::largest_fitting_context(m, q, limit);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    j["context_limit"] = limit;
    return j;
}

void print_fit(const ordered_json& fit, std::FILE* out) {
    const ordered_json& p = fit["placement"];
    print_placement(p, out);
    std::fprintf(out, "\nfits:          %s\n", fit["fits"].get<bool>() ? "yes" : "no");
    if (!p["error"].is_null()) std::fprintf(out, "why:           %s\n", p["error"].get<std::string>().c_str());
    const long long largest = fit["largest_context"].get<long long>(), limit = fit["context_limit"].get<long long>();
    const long long parallel = p["parallel"].get<long long>();
    const std::string per =
        parallel > 1 ? " per sequence (" + std::to_string(parallel) + " sequences)" : " per sequence";
    if (largest == 0) {
        std::fprintf(out,
                     "largest context that fits: none (not even one KV block "
                     "fits beside the weights and scratch)\n");
    } else {
        const std::string searched = largest == limit ? ", the most searched (the model's training context or -c)" : "";
        std::fprintf(out, "largest context that fits: %lld%s%s\n", largest, per.c_str(), searched.c_str());
    }
}

}  // namespace deskside::cli
