// Reference files on which deskside is, today, further from llama.cpp's reference runs than
// llama.cpp's own builds are (SPREAD.md's bar, llama_cpp_spread.h), per device and CPU level.
//
// Each entry is a defect, listed in docs/ENGINE.md ("Closeness now"): the arithmetic of a kernel
// (mostly the AVX2 K-quant / i-quant dots and the batched GEMM tiles, which sum in another order
// than ggml's) differs from llama.cpp's more than llama.cpp's AVX2 and AVX-512 builds differ from
// each other. Greedy tokens and teacher-forced argmax still meet the bar on every one of them (the
// check enforces those for every file). Until fixed, an entry holds the file to what was measured
// (mean KL x kKnownMissSlack, top-1 disagreements + 1, max abs x kKnownMissSlack), so it cannot
// get worse unnoticed; the check WARNs when an entry meets the bar and should be removed.
// Regenerate: scripts/closeness-table.sh > t.md; scripts/known-misses.py t.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace deskside::test {

struct KnownMiss {
    const char* stem;
    // "cpu avx2", "cpu avx512", "cpu scalar", "vulkan0 exact", "vulkan0 plain"; cuda0 is held to "cpu avx2"
    const char* where;
    double mean_kl;
    int64_t top1_disagreements;
    double max_abs;
};

// Room for the last digits to move with a compiler, a libm or a driver.
constexpr double kKnownMissSlack = 1.25;

inline constexpr KnownMiss kKnownMisses[] = {
#include "known_misses.inc"
};

inline const KnownMiss* find_known_miss(std::string_view stem, std::string_view where) {
    for (const KnownMiss& k : kKnownMisses)
        if (stem == k.stem && where == k.where) return &k;
    return nullptr;
}

}  // namespace deskside::test
