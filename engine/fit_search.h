// "Does it fit, and how much context does": the largest context per sequence
// whose placement plan fits the devices, found by asking the plan itself
// (memory_needs + plan_placement) at each candidate context, so the answer can
// never disagree with what `inspect --devices`, `fits` and the loader compute
// for that context.
#pragma once

#include <cstdint>
#include <span>

#include "engine/placement.h"

namespace deskside::engine {

// KV cache positions for `ctx` positions per sequence: each of `n_parallel`
// sequences gets whole blocks, as serve allocates them.
int64_t kv_positions(int64_t ctx, int64_t n_parallel, int64_t block_size);

struct FitQuery {
    std::span<const PlanDevice> devices;
    SplitSpec split;
    ExpertOffload experts;
    KvCacheConfig cache;  // n_positions is set per candidate
    int64_t n_batch = 512;
    int64_t n_parallel = 1;
};

// The largest context per sequence, at most `max_ctx`, whose plan fits: a
// multiple of the cache's block size, or `max_ctx` itself. 0 when not even the
// smallest context fits. The plan only grows with the context (more KV cache on
// the same layers), so a binary search over blocks finds it. Throws what
// memory_needs / plan_placement throw.
int64_t largest_fitting_context(const models::ModelInfo& info, const FitQuery& query, int64_t max_ctx);

}  // namespace deskside::engine
