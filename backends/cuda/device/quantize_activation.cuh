// Activation quantization on the device, one block per call, writing the bytes
// quant::activation_from_float writes: the x86 SIMD quantizers for Q8_0 / Q8_1 (127 / amax,
// round half to even), the reference for Q8_K, plain conversion for F16 / BF16.
// ref: quant/activation_quant.cpp, quant/ref_q6_q8_k.cpp (from_float_q8_k), quant/ref_float.cpp
#pragma once

#include "backends/cuda/device/dequantize.cuh"

namespace deskside::backends::cuda::device {

// Levels round_half_even(x * 127 / amax) into qs; returns d = amax / 127 and their sum.
DESKSIDE_HD inline float quantize_q8_x86(const float* x, int8_t* qs, int* level_sum) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) {
        const float a = abs_f(x[j]);
        amax = amax < a ? a : amax;  // std::max(amax, a)
    }
    const float id = amax != 0.0f ? div_rn(127.f, amax) : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
        qs[j] = static_cast<int8_t>(round_half_even(mul_rn(x[j], id)));
        sum += qs[j];
    }
    *level_sum = sum;
    return div_rn(amax, 127.f);
}

DESKSIDE_HD inline void quantize_activation(const float* x, BlockQ8_0& y) {
    int sum;
    y.d = fp32_to_fp16(quantize_q8_x86(x, y.qs, &sum));
}

DESKSIDE_HD inline void quantize_activation(const float* x, BlockQ8_1& y) {
    int sum;
    const float d = quantize_q8_x86(x, y.qs, &sum);
    y.d = fp32_to_fp16(d);
    y.s = fp32_to_fp16(mul_rn(d, static_cast<float>(sum)));
}

DESKSIDE_HD inline void quantize_activation(const float* x, BlockQ8_K& y) {
    float max = 0, amax = 0;
    for (int e = 0; e < kQKK; ++e) {
        if (abs_f(x[e]) > amax) {
            amax = abs_f(x[e]);
            max = x[e];
        }
    }
    if (amax == 0.0f) {
        y.d = 0.0f;
        for (int e = 0; e < kQKK; ++e) y.qs[e] = 0;
        for (int g = 0; g < kQKK / 16; ++g) y.bsums[g] = 0;
        return;
    }
    const float iscale = div_rn(-127.f, max);
    for (int e = 0; e < kQKK; ++e) {
        const int q = nearest_int(mul_rn(iscale, x[e]));
        y.qs[e] = static_cast<int8_t>(q < 127 ? q : 127);
    }
    for (int g = 0; g < kQKK / 16; ++g) {
        int sum = 0;
        for (int e = 16 * g; e < 16 * g + 16; ++e) sum += y.qs[e];
        y.bsums[g] = static_cast<int16_t>(sum);
    }
    y.d = div_rn(1.0f, iscale);
}

// F16 / BF16 activations of F16 / BF16 weights: element-wise conversion (quant's from_float).
DESKSIDE_HD inline uint16_t quantize_activation_f16(float x) { return fp32_to_fp16(x); }
DESKSIDE_HD inline uint16_t quantize_activation_bf16(float x) { return fp32_to_bf16(x); }

}  // namespace deskside::backends::cuda::device
