// largest_fitting_context against a linear scan of the same plan: the binary
// search must find the largest context whose plan fits, for one device and a
// split, one sequence and several.
#include <catch2/catch.hpp>
#include <vector>

#include "engine/fit_search.h"
#include "models/model.h"
#include "support/paths.h"

using namespace deskside;

namespace {

bool plan_fits(const models::ModelInfo& m, const engine::FitQuery& q, int64_t ctx) {
    engine::KvCacheConfig cache = q.cache;
    cache.n_positions = engine::kv_positions(ctx, q.n_parallel, cache.block_size);
    const engine::MemoryNeeds needs = engine::memory_needs(m, cache, q.n_batch);
    return engine::plan_placement(needs, q.devices, q.split, q.experts).fits();
}

}  // namespace

TEST_CASE("largest_fitting_context is the largest context a linear scan finds", "[engine][placement]") {
    const models::ModelInfo m = models::load_model(test::shared_path("models/stories260K.gguf"));
    const int64_t limit = 1000;  // not a multiple of the block size: the limit itself is a candidate
    for (const int64_t parallel : {1, 3}) {
        for (const bool split : {false, true}) {
            engine::FitQuery q;
            q.n_parallel = parallel;
            q.n_batch = 64;
            // Memory for the weights and scratch plus a range of KV sizes, from none
            // to plenty.
            engine::KvCacheConfig probe = q.cache;
            probe.n_positions = 0;
            const engine::MemoryNeeds base = engine::memory_needs(m, probe, q.n_batch);
            uint64_t fixed = base.embedding + base.output + base.scratch + base.scratch_output;
            for (uint64_t w : base.layer_weights) fixed += w;
            for (const uint64_t extra : {uint64_t{0}, uint64_t{100'000}, uint64_t{1'000'000}, uint64_t{1} << 30}) {
                INFO("parallel " << parallel << " split " << split << " extra " << extra);
                std::vector<engine::PlanDevice> devices;
                if (split)
                    devices = {{"a", fixed + extra}, {"b", fixed + extra}};
                else
                    devices = {{"a", fixed + extra}};
                q.devices = devices;
                int64_t expect = 0;
                for (int64_t ctx = 1; ctx <= limit; ++ctx)
                    if ((ctx % q.cache.block_size == 0 || ctx == limit) && plan_fits(m, q, ctx)) expect = ctx;
                CHECK(engine::largest_fitting_context(m, q, limit) == expect);
            }
        }
    }
}
