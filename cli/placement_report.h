// The placement plan as `inspect --devices`, `fits` and `pull` read its flags
// and show it: the flags that size it (devices, context, sequences, batch,
// cache types), the plan as JSON (keys in docs/CLI.md) and the table printed
// from that JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

#include "cli/args.h"
#include "cli/model_flags.h"
#include "engine/placement.h"
#include "models/model.h"

namespace deskside::cli {

struct PlacementFlags {
    DeviceFlags devices;
    std::optional<long long> ctx;  // per sequence; default: the model's training context, at most 4096
    long long parallel = 1;
    engine::EngineOptions options;  // cache types, block size and batch
    bool sizing_given = false;      // -c, -np, -b or --cache-type-* was on the command line
};

// Reads --devices and the rest of DeviceFlags, -c/--ctx-size, -np/--parallel,
// -b/--batch-size,
// --cache-type-k/v. Throws UsageError.
PlacementFlags read_placement_flags(Args& args);

// --free SIZE[,SIZE...]: the free memory to plan against, one size per
// --devices entry ("24GiB", "512M", bytes), instead of what the devices report
// now; nullopt when absent. Throws UsageError.
std::optional<std::vector<uint64_t>> read_free_flag(Args& args);

// The --devices entries with their free memory: `free` when given (the names
// are then labels of a machine that need not be this one), else what the
// devices report. Throws UsageError.
std::vector<engine::PlanDevice> placement_devices(const PlacementFlags& flags,
                                                  const std::optional<std::vector<uint64_t>>& free);

// The context per sequence the plan is for: -c, else the model's training
// context, at most 4096 (as serve does).
int64_t placement_context(const models::ModelInfo& m, const PlacementFlags& f);

// The plan as JSON; "error" holds check_plan's message (the device, the
// shortfall, advice) when it does not fit. Sets f.options.cache.n_positions.
nlohmann::ordered_json describe_placement(const models::ModelInfo& m, PlacementFlags& f,
                                          std::span<const engine::PlanDevice> devices);

// The plan's table, from describe_placement's JSON.
void print_placement(const nlohmann::ordered_json& p, std::FILE* out = stdout);

// "Does it fit?": describe_placement's plan under "placement", its answer under
// "fits", and "largest_context", the largest context per sequence whose plan
// fits (engine/fit_search.h), searched up to "context_limit": the model's
// training context or -c when larger (0 when neither is known: the context
// asked for then).
nlohmann::ordered_json describe_fit(const models::ModelInfo& m, PlacementFlags& f,
                                    std::span<const engine::PlanDevice> devices);

// The plan's table, then "fits: yes/no", the reason when no, and the largest
// context.
void print_fit(const nlohmann::ordered_json& fit, std::FILE* out = stdout);

}  // namespace deskside::cli
