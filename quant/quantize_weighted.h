// The importance-weighted quantizers llama-quantize runs when given an importance matrix, one row
// at a time (the weights are per column, so a row is the unit). Private to quant/: the rest of
// deskside reaches them through quantize_rows() (quant/quantize_rows.h).
#pragma once

#include <cstdint>

#include "quant/types.h"

namespace deskside::quant {

// Whether `type` has a weighted quantizer here.
bool has_weighted_quantizer(TypeId type);

// Quantizes one row of n_per_row floats (a multiple of the block size) into `dst` with the
// per-column `weights` (n_per_row values). Only IQ4_NL and IQ4_XS accept nullptr weights: their
// weighted search is their only quantizer, run with x^2 as the weights when no imatrix is given.
void quantize_row_weighted(TypeId type, const float* x, void* dst, int64_t n_per_row, const float* weights);

}  // namespace deskside::quant
