// GELU (tanh approximation) as llama.cpp's CPU backend evaluates it: a table indexed by the input
// rounded to F16, holding for every F16 input the formula's value rounded to F16. One definition
// for every backend: the CPU backend looks values up in it, the Vulkan backend uploads it once
// and its shader looks up the same entries, so both give the same bits (a device's tanh is not
// libm's; docs/VULKAN.md, "Bit-exact ops"). Inputs with |x| >= kGeluSaturation bypass the table
// (0 below, x above).
//
// Header-only for the reason backends/rope_angles.h is (the Vulkan backend does not link the CPU
// backend; neither includer is built with FMA contraction, and both call libm's tanhf).
// ref: Hendrycks & Gimpel, arXiv:1606.08415 (tanh approximation); ggml-cpu vec.h (GGML_GELU_FP16)
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "quant/float16.h"

namespace deskside::backends {

inline constexpr float kGeluSaturation = 10.0f;

// 65536 entries: entry h is GELU(fp16 h) rounded to F16, as a float.
inline std::vector<float> gelu_f16_table() {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
    constexpr float kCubic = 0.044715f;
    std::vector<float> t(1 << 16);
    for (uint32_t h = 0; h < t.size(); ++h) {
        const float v = quant::fp16_to_fp32(static_cast<uint16_t>(h));
        const float g = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + kCubic * v * v)));
        t[h] = quant::fp16_to_fp32(quant::fp32_to_fp16(g));
    }
    return t;
}

}  // namespace deskside::backends
