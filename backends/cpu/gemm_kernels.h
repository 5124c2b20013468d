// Batched (prompt) matmul kernels and SIMD activation quantizers for the CPU backend.
//
// A gemm kernel computes a tile of outputs, several weight rows against several activation rows,
// decoding each weight block once per tile instead of once per output element. Batch invariance
// (DESIGN.md key decision 5) is kept by construction: every output is summed in exactly the
// order of the single-row kernel best_vec_dot hands out for the same type and instruction set
// (same integer lanes, same float FMA chain over blocks, same horizontal sum), so a token's
// result is bit-identical whether it is computed alone (decode) or inside a batch (prompt).
// best_gemm only returns a kernel whose single-row twin is the one best_vec_dot returns.
//
// The activation quantizers produce exactly what quant::activation_from_float produces (the
// scalar definition, with llama.cpp's x86 rounding for Q8_0 / Q8_1), only faster.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/dot_kernels.h"
#include "quant/quant.h"

namespace deskside::backends::cpu {

// y[c * y_stride + r] = vec_dot(k, w + r * w_stride, a + c * a_stride) for r in [0, n_rows) and
// c in [0, n_cols). w rows are in the weight type, a rows in its vec_dot_type; y_stride counts
// floats.
using GemmFn = void (*)(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* a,
                        size_t a_stride, int64_t n_cols, float* y, size_t y_stride);

// The tiled kernel for weights of `weight_type` at selected_isa(), or nullptr where there is
// none whose results equal best_vec_dot's bit for bit (the caller then loops over vec_dot).
GemmFn best_gemm(quant::TypeId weight_type);

// The tiled kernel of level `isa` for `weight_type`, nullptr if that level has none. Its results
// equal vec_dot_for(weight_type, isa)'s when that returns this level's own kernel.
GemmFn gemm_for(quant::TypeId weight_type, CpuIsa isa);

// The activation quantizer for `vec_dot_type` at selected_isa(): a SIMD one where it exists,
// else quant::activation_from_float(vec_dot_type). Same bytes either way.
quant::FromFloatFn best_activation_quantizer(quant::TypeId vec_dot_type);

// The SIMD activation quantizer of level `isa`, nullptr where it has none.
quant::FromFloatFn activation_quantizer_for(quant::TypeId vec_dot_type, CpuIsa isa);

}  // namespace deskside::backends::cpu
