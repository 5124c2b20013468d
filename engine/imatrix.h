// Importance matrices, collected as llama-imatrix collects them, so that our files and its files
// can stand in for each other (models/imatrix_file.h holds the format).
//
// The text's tokens are cut into chunks of n_ctx; each chunk's first token becomes BOS (when the
// model has one) and the chunk is decoded from an empty cache with every token wanting logits
// (llama-imatrix asks for them all, so the last layer computes every row). For each layer weight,
// every activation row that goes into it adds its squared elements to the weight's column sums
// (in_sum2) and one to its count; for stacked experts, each (token, expert slot) adds to the
// sums of the expert it was routed to. As in llama-imatrix, a dense matmul over fewer than 16 rows
// is not counted, and sums are accumulated in float, row after row.
// ref: llama.cpp tools/imatrix/imatrix.cpp (compute_imatrix, IMatrixCollector::collect_imatrix)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "engine/model.h"
#include "models/imatrix_file.h"

namespace deskside::engine {

struct ImatrixRun {
    int64_t n_ctx = 512;     // tokens per chunk (llama-imatrix -c)
    int64_t max_chunks = 0;  // 0: every whole chunk of the text (llama-imatrix --chunks)
    std::optional<int32_t> bos;
    // Called after each chunk with the chunks done and the chunks to do.
    std::function<void(int64_t done, int64_t total)> progress;
};

// Runs `tokens` through `model` (which must take a batch of n_ctx tokens and hold n_ctx positions
// of sequence 0) and returns the importance matrix: one entry per observed weight, sorted by name,
// chunk_count and chunk_size set (datasets left to the caller). Throws std::invalid_argument when
// the tokens are fewer than two chunks (llama-imatrix's minimum).
models::Imatrix collect_imatrix(Model& model, std::span<const int32_t> tokens, const ImatrixRun& run);

}  // namespace deskside::engine
