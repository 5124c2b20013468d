// How far llama.cpp itself lands from its own reference runs, read from
// ../shared/reference/SPREAD.md at test time (data we did not write, so it is parsed, never
// copied), and the bar it sets for the engine: "as close as llama.cpp" means no further from the
// references, teacher-forced, than the worse of llama.cpp's two builds measured there, (iii) the
// AVX-512 build that made the references and (i) the same source built for AVX2.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace deskside::test {

// One build's cell of SPREAD.md's "Per file" table: max abs / mean row max / mean KL / top-1.
struct SpreadCell {
    double max_abs = 0;
    double mean_row_max = 0;
    double mean_kl = 0;           // nats, as printed
    double mean_kl_rounding = 0;  // half a unit of mean_kl's second significant digit (0 for a printed 0)
    int64_t top1_disagreements = 0;  // rows whose argmax differs, from the printed top-1 share and the rows
};

// One file's row of that table.
struct LlamaCppSpread {
    int64_t rows = 0;            // rows of the 5 cases (prompt + greedy_tokens[:-1] each)
    SpreadCell reference_build;  // (iii)
    SpreadCell avx2_build;       // (i)
};

// The "Per file" row of `stem` (a file name without .gguf). Throws std::runtime_error naming
// SPREAD.md and the stem when the row is missing or a cell does not parse: a reference file the
// yardstick does not cover cannot be judged.
LlamaCppSpread llama_cpp_spread(const std::string& stem);

// Every row of that table by stem (throws as above when the table is missing or a row is malformed).
std::map<std::string, LlamaCppSpread> llama_cpp_spread_table();

// Where both builds are exact on a measure, the bar is this small absolute margin instead of 0.
constexpr double kExactMeanKlMargin = 1e-6;  // nats: the F32 files' own spread
constexpr double kExactTop1Margin = 0.01;    // share of rows whose argmax may differ

// What an engine must meet on one file.
struct ClosenessBar {
    double mean_kl = 0;              // at most
    int64_t top1_disagreements = 0;  // rows, at most
    double max_abs = 0;              // a gross-error bound only, not closeness (kSanityFactor)
};

// A wrong RoPE, norm or scale moves logits by several units; rounding noise stays near
// llama.cpp's own max abs. The sanity bound is this factor over the larger of the two builds', and
// at least kSanityFloor.
constexpr double kSanityFactor = 3.0;
constexpr double kSanityFloor = 0.1;

// The larger of (iii) and (i) for mean KL (each read at the top of its printed rounding) and for
// top-1 disagreements; kExact*Margin where both are 0; kSanityFactor x the larger max abs
// (at least kSanityFloor).
ClosenessBar closeness_bar(const LlamaCppSpread& spread);

}  // namespace deskside::test
