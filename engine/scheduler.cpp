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

int64_t blocks_to_grow(int64_t from, int64_t to, int64_t block_size) {
    if (to <= from) return 0;
    return (to + block_size - 1) / block_size - from / block_size;
}

namespace {

size_t common_prefix(const std::vector<int32_t>& a, std::span<const int32_t> b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

}  // namespace

PrefixChoice choose_prefix(std::span<const CachedPrefix> sequences, std::span<const int32_t> prompt) {
    PrefixChoice c;
    size_t target_common = 0;
    for (size_t i = 0; i < sequences.size(); ++i) {
        if (!sequences[i].idle) continue;
        const size_t common = common_prefix(*sequences[i].tokens, prompt);
        const bool fewer = c.target >= 0 && sequences[i].tokens->size() < sequences[c.target].tokens->size();
        if (c.target < 0 || common > target_common || (common == target_common && fewer)) {
            c.target = static_cast<int64_t>(i);
            target_common = common;
        }
    }
    if (c.target < 0) return c;
    size_t source_common = target_common;
    for (size_t i = 0; i < sequences.size(); ++i) {
        if (static_cast<int64_t>(i) == c.target) continue;
        const size_t common = common_prefix(*sequences[i].tokens, prompt);
        if (common > source_common) {
            c.source = static_cast<int64_t>(i);
            source_common = common;
        }
    }
    c.reuse = std::max<int64_t>(0, std::min<int64_t>(static_cast<int64_t>(source_common),
                                                     static_cast<int64_t>(prompt.size()) - 1));
    if (c.reuse <= static_cast<int64_t>(target_common)) c.source = -1;
    return c;
}

}  // namespace deskside::engine
