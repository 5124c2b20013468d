// Quantizing whole rows of a weight matrix, as llama-quantize does (ggml_quantize_chunk).
//
// Without an importance matrix every type goes through its reference quantizer (quant_traits()'s
// from_float), except IQ4_NL and IQ4_XS, whose only quantizer is the weighted search (run with
// x^2 as the weights, as llama.cpp does). With one (`imatrix`: n_per_row weights, one per column,
// as llama-imatrix writes them), the importance-weighted searches of llama.cpp's quantize_*_impl are used, so that the
// bytes equal llama-quantize --imatrix's. Rows are independent: callers split a tensor's rows
// across threads and call this per slice.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace deskside::quant {

// Whether quantize_rows() can produce `type` (with an imatrix when `with_imatrix`). Today the
// answer is the same either way: every type is quantized as llama.cpp quantizes it with and
// without an imatrix (the IQ1-IQ3 types, whose weighted searches are not here, are refused).
bool can_quantize(TypeId type, bool with_imatrix = false);

// Quantizes `nrows` rows of `n_per_row` floats (a multiple of the type's block size) from `src`
// into `dst` (nrows * row_bytes(type, n_per_row) bytes). `imatrix` is nullptr or n_per_row
// weights. Returns the bytes written. Throws std::invalid_argument for a type can_quantize()
// refuses or a row length that does not divide into blocks.
size_t quantize_rows(TypeId type, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                     const float* imatrix);

}  // namespace deskside::quant
