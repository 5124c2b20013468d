// The continuous-batching step planner: decides how many tokens each running sequence puts into
// the next decode() batch (ref: vLLM's scheduler, Kwon et al. arXiv:2309.06180; chunked prefill
// as in Agrawal et al., "Sarathi", arXiv:2308.16369).
//
// One mechanism covers prefill, chunked prefill and decode: a sequence that is generating wants
// one token per step; a sequence with prompt tokens not yet in the KV cache wants all of them.
// Decoding sequences go first (their latency is what users see between tokens), then prompt
// chunks fill the rest of the token budget in arrival order, so a long prompt never stalls the
// streams already running and is itself taken in several steps.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace deskside::engine {

struct SequenceDemand {
    int64_t pending = 0;     // tokens not yet in the KV cache (1 for a generating sequence)
    bool decoding = false;   // generating (as opposed to prefilling its prompt)
};

// Tokens per sequence for the next step, same order as `demands`; their sum is at most
// max(token_budget, number of decoding sequences) (every decoding sequence always gets its
// token, so a budget smaller than the running set never starves anyone).
std::vector<int64_t> plan_step(std::span<const SequenceDemand> demands, int64_t token_budget);

// How many waiting requests may start now: free slots, but never more than are waiting.
int64_t admit_count(int64_t n_running, int64_t n_waiting, int64_t max_running);

}  // namespace deskside::engine
