// The placement plan: which device runs which layers of a model, and whether each device's share
// (weights, KV cache, scratch) fits its free memory. Computed from the tensor table alone, before
// any weight is loaded, so `deskside inspect --devices` can print it and a plan that cannot fit
// fails with advice instead of an allocation error halfway through loading.
//
// Layout decisions (DESIGN.md key decision 3):
// - Each device owns a contiguous range of layers, their weights and their KV cache; only the
//   residual stream ([n_embd, n_tokens] F32) crosses between ranges, once per boundary per step.
// - The token embedding goes to the first device: get_rows reads n_tokens rows of it and the
//   result is the first layer's input there, so nothing crosses. (llama.cpp keeps the embedding
//   on the CPU instead, which saves device memory for large vocabularies; our embedding follows
//   the first device, which is the CPU whenever the CPU is listed first.)
// - The output norm and head go with the last layer, so the logits come from one device and the
//   host downloads them once. A tied head (no output.weight) is token_embd placed a second time
//   on the last device when the model spans several devices.
// - Every device holds the activation scratch for n_batch tokens; the last device also holds the
//   rows that want logits (engine/scratch.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kv_cache.h"
#include "models/model.h"

namespace deskside::engine {

// What a model needs, from its tensor table and the cache/batch settings.
struct MemoryNeeds {
    int64_t n_layer = 0;
    std::vector<uint64_t> layer_weights;  // bytes of blk.<il>.* per layer (vectors as F32)
    std::vector<uint64_t> layer_experts;  // of those, the expert block's (router and experts; 0 when dense)
    uint64_t layer_kv = 0;                // K + V cache bytes of one layer
    uint64_t kv_per_position = 0;         // K + V bytes per cached position per layer
    uint64_t embedding = 0;               // token_embd (and model-wide tensors not listed below)
    uint64_t output = 0;                  // output_norm + output (token_embd when tied)
    uint64_t tied_head = 0;               // bytes of `output` that are token_embd itself (tied
                                          // embeddings): shared, not copied, on a single device
    uint64_t scratch = 0;                 // activations of every device
    uint64_t scratch_output = 0;          // extra activations of the last device (logit rows)
    int64_t block_size = 16;              // KV cache block size, for context advice
};

// Throws std::invalid_argument for a model without layers (a vocabulary-only file).
MemoryNeeds memory_needs(const models::ModelInfo& info, const KvCacheConfig& cache, int64_t n_batch);

// A device as the plan sees it: a name from backends::list_devices() and its free memory.
// A name listed more than once ("cpu,cpu") is one pool of memory shared evenly by its entries.
struct PlanDevice {
    std::string name;
    uint64_t free_memory = 0;
};

// The comma-separated items of a list flag ("vulkan0,cpu", "3,1", "128,256"), empty items kept so
// that callers can name them in their errors.
std::vector<std::string> comma_items(std::string_view text);

// --split: "auto" (empty ratios) or positive numbers, one per device ("3,1").
struct SplitSpec {
    std::vector<double> ratios;
    bool is_auto() const { return ratios.empty(); }
};
// Throws std::invalid_argument naming the bad entry.
SplitSpec parse_split(std::string_view text);

struct DevicePlan {
    std::string name;
    int64_t layer_begin = 0;  // layers [layer_begin, layer_end)
    int64_t layer_end = 0;
    bool embedding = false;   // token_embd here (the first device)
    bool output = false;      // output norm + head here (the last device)
    uint64_t weight_bytes = 0;
    uint64_t expert_bytes = 0;  // of weight_bytes, mixture-of-experts blocks
    uint64_t kv_bytes = 0;
    uint64_t scratch_bytes = 0;
    uint64_t free_memory = 0;  // this entry's budget (a shared pool divided by its entries)
    uint64_t total_bytes() const { return weight_bytes + kv_bytes + scratch_bytes; }
    bool fits() const { return total_bytes() <= free_memory; }
};

// --cpu-moe / --n-cpu-moe N: the expert blocks of layers [0, n_layers) stay in host memory and
// run on the CPU (`host`), everything else follows the devices' plan.
struct ExpertOffload {
    int64_t n_layers = 0;  // clamped to the model's layers; 0 = none
    PlanDevice host{"cpu", 0};
};

struct Plan {
    std::vector<DevicePlan> devices;
    // The host's share when expert blocks are offloaded: layers [layer_begin, layer_end)'s experts
    // (weight_bytes = expert_bytes) and the scratch their blocks run in; absent otherwise.
    std::optional<DevicePlan> host_experts;
    bool fits() const;
    // The plan's layer counts as a --split value, e.g. "24,8".
    std::string split_text() const;
};

// Layer ranges for `devices` by `split` (ratios of layers, or auto: proportional to each
// device's free memory after its fixed share: scratch, and embedding / output head at the ends),
// with the bytes each device takes. Does not check the fit: see check_plan. Throws
// std::invalid_argument when there are no devices, more devices than layers, or the number of
// ratios differs from the number of devices.
Plan plan_placement(const MemoryNeeds& needs, std::span<const PlanDevice> devices, const SplitSpec& split,
                    const ExpertOffload& experts = {});

// Throws std::runtime_error when a device of `plan` lacks memory: which device, by how much,
// and what fits instead (an auto split that fits, or the largest context per sequence that fits
// this split for `n_parallel` sequences).
void check_plan(const Plan& plan, const MemoryNeeds& needs, std::span<const PlanDevice> devices, int64_t n_parallel,
                const ExpertOffload& experts = {});

// "1.50 GiB", for plans and their errors.
std::string format_bytes(uint64_t bytes);

}  // namespace deskside::engine
