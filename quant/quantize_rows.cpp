// quantize_rows(): llama.cpp's ggml_quantize_chunk. With an importance matrix, a type with a
// weighted search here (quant/quantize_weighted.cpp) uses it; every other type llama.cpp
// quantizes the same with or without one (Q8_0, F16, BF16, TQ1_0, TQ2_0, MXFP4 ignore it), so
// it goes through its reference quantizer either way. IQ4_NL / IQ4_XS have only the weighted
// search, which runs with x^2 weights when there is no imatrix.
#include "quant/quantize_rows.h"

#include <stdexcept>
#include <string>

#include "quant/quant.h"
#include "quant/quantize_weighted.h"

namespace deskside::quant {
namespace {

bool has_reference_quantizer(TypeId type) {
    const QuantTraits* t = quant_traits(type);
    return t != nullptr && t->from_float != nullptr && type != TypeId::Q8_1 && type != TypeId::Q8_K;
}

bool weighted_without_imatrix(TypeId type) { return type == TypeId::IQ4_NL || type == TypeId::IQ4_XS; }

}  // namespace

// The answer does not depend on the imatrix: see the top of the file.
bool can_quantize(TypeId type, bool /*with_imatrix*/) {
    return has_weighted_quantizer(type) || has_reference_quantizer(type);
}

size_t quantize_rows(TypeId type, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                     const float* imatrix) {
    const TypeInfo& info = type_info(type);
    if (!can_quantize(type, imatrix != nullptr)) {
        throw std::invalid_argument("cannot quantize to " + std::string(info.name) +
                                    (imatrix ? " with an importance matrix" : ""));
    }
    if (n_per_row <= 0 || n_per_row % info.block_size != 0) {
        throw std::invalid_argument("rows of " + std::to_string(n_per_row) + " elements do not divide into " +
                                    std::string(info.name) + " blocks of " + std::to_string(info.block_size));
    }
    const size_t row = row_bytes(type, n_per_row);
    auto* out = static_cast<uint8_t*>(dst);
    const bool weighted = has_weighted_quantizer(type) && (imatrix != nullptr || weighted_without_imatrix(type));
    const FromFloatFn from_float = weighted ? nullptr : quant_traits(type)->from_float;
    for (int64_t r = 0; r < nrows; ++r) {
        if (weighted) quantize_row_weighted(type, src + r * n_per_row, out + r * row, n_per_row, imatrix);
        else from_float(src + r * n_per_row, out + r * row, n_per_row);
    }
    return row * static_cast<size_t>(nrows);
}

}  // namespace deskside::quant
