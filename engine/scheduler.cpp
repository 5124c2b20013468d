#include "engine/scheduler.h"

#include <algorithm>

namespace deskside::engine {

std::vector<int64_t> plan_step(std::span<const SequenceDemand> demands, int64_t token_budget) {
    std::vector<int64_t> plan(demands.size(), 0);
    int64_t used = 0;
    for (size_t i = 0; i < demands.size(); ++i) {
        if (demands[i].decoding && demands[i].pending > 0) {
            plan[i] = 1;
            ++used;
        }
    }
    for (size_t i = 0; i < demands.size(); ++i) {
        if (demands[i].decoding || demands[i].pending <= 0) continue;
        const int64_t room = token_budget - used;
        if (room <= 0) break;
        plan[i] = std::min(room, demands[i].pending);
        used += plan[i];
    }
    return plan;
}

int64_t admit_count(int64_t n_running, int64_t n_waiting, int64_t max_running) {
    return std::clamp<int64_t>(max_running - n_running, 0, n_waiting);
}

}  // namespace deskside::engine
