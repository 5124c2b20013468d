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

#include <cstddef>
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

// KV blocks a sequence holding `from` positions takes to hold `to`: the blocks past the one
// position `from` is in, and that one too when `from` is not block-aligned (it may be shared with
// another sequence after a fork, and is then copied on the first write). An upper bound, so that
// admitting on it never runs the cache dry.
int64_t blocks_to_grow(int64_t from, int64_t to, int64_t block_size);

// A cached sequence as prefix reuse sees it.
struct CachedPrefix {
    const std::vector<int32_t>* tokens = nullptr;  // tokens whose KV the sequence holds
    bool idle = false;                             // no job runs in it (it may take a new one)
};

// Where a new prompt runs: `target`, an idle sequence (the one sharing the longest prefix with
// the prompt; ties: the one caching the least, so longer idle prefixes survive for later
// requests), keeping its first `reuse` positions, or forking them from `source` when another
// sequence, idle or running, has computed more of the prompt (a shared system prompt of a
// request still generating). At least the last prompt token is computed again: its logits start
// the generation. target is -1 when no sequence is idle.
struct PrefixChoice {
    int64_t target = -1;
    int64_t source = -1;  // -1: reuse in place
    int64_t reuse = 0;
};
PrefixChoice choose_prefix(std::span<const CachedPrefix> sequences, std::span<const int32_t> prompt);

}  // namespace deskside::engine
