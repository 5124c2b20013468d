// Activation quantizers as llama.cpp's x86 CPU backend runs them.
//
// The traits' from_float for Q8_0 and Q8_1 is llama.cpp's *reference* quantizer (scale
// 1 / (amax / 127), round half away from zero), which llama-quantize uses for weights. For
// activations llama.cpp's x86 build uses its SIMD quantizer instead: scale 127 / amax and round
// half to even. The two disagree on a few levels per row, enough to move a quantized model's
// logits past a 2e-2 comparison with llama.cpp, so matmul quantizes activations with these.
// This is the one definition: the CPU backend's AVX2 quantizers (backends/cpu/gemm_kernels.h,
// best_activation_quantizer) are tested to write exactly these bytes.
// ref: ggml/src/ggml-cpu/arch/x86/quants.c (quantize_row_q8_0, quantize_row_q8_1, AVX2 path)
#pragma once

#include "quant/quant.h"

namespace deskside::quant {

// The quantizer for activations of type `vec_dot_type`: the x86 variants above for Q8_0 and
// Q8_1, the traits' from_float for every other type (Q8_K, F16, BF16, F32 use the reference on
// x86 too), nullptr for a type without traits.
FromFloatFn activation_from_float(TypeId vec_dot_type);

}  // namespace deskside::quant
