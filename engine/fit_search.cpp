#include "engine/fit_search.h"

#include <algorithm>

namespace deskside::engine {

int64_t kv_positions(int64_t ctx, int64_t n_parallel, int64_t block_size) {
    return n_parallel * ((ctx + block_size - 1) / block_size) * block_size;
}

int64_t largest_fitting_context(const models::ModelInfo& info, const FitQuery& query, int64_t max_ctx) {
    const int64_t bs = query.cache.block_size;
    if (max_ctx < 1 || bs < 1) return 0;
    const auto context_of = [&](int64_t blocks) { return std::min(blocks * bs, max_ctx); };
    const auto fits = [&](int64_t blocks) {
        KvCacheConfig cache = query.cache;
        cache.n_positions = kv_positions(context_of(blocks), query.n_parallel, bs);
        const MemoryNeeds needs = memory_needs(info, cache, query.n_batch);
        return plan_placement(needs, query.devices, query.split, query.experts).fits();
    };
    int64_t lo = 0;                        // blocks known to fit (0: none yet)
    int64_t hi = (max_ctx + bs - 1) / bs;  // blocks not yet known not to fit
    if (fits(hi)) return max_ctx;
    --hi;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo == 0 ? 0 : context_of(lo);
}

}  // namespace deskside::engine
