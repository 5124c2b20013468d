// Scalar reference quantize / dequantize / dot for every block format deskside computes with.
//
// One traits entry per weight type, keyed by the GGUF type id (quant/types.h has the geometry).
// These are the references every kernel (CPU SIMD, Vulkan, CUDA) is tested against, kept forever.
// Layouts are bit-compatible with GGUF / ggml (ref: ggml/src/ggml-common.h block structs).
#pragma once

#include <cstdint>

#include "quant/types.h"

namespace deskside::quant {

// Dequantize n elements (a multiple of the block size) from blocks at `src` into floats.
using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
// Reference quantization of n floats (a multiple of the block size) into blocks at `dst`.
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);
// Dot product of n elements: weights `w` in the weight type, activations `a` already quantized to
// the traits' vec_dot_type.
using VecDotFn = float (*)(int64_t n, const void* w, const void* a);

struct QuantTraits {
    TypeId type;
    ToFloatFn to_float;      // always present
    FromFloatFn from_float;  // nullptr where deskside has no quantizer (IQ types)
    TypeId vec_dot_type;     // what activations are quantized to for vec_dot (as llama.cpp does)
    VecDotFn vec_dot;        // scalar reference
};

// Traits for a type deskside computes with, or nullptr.
const QuantTraits* quant_traits(TypeId id);

}  // namespace deskside::quant
