// The per-output arithmetic of the CUDA backend's row and element-wise ops (kernels_norm_rope.cu,
// kernels_elementwise.cu), written once for the device and the host test (tests/backends/
// test_cuda_exact_ops.cpp), which compares it with the CPU backend's bytes: the CPU's float
// operations in its order (backends/cpu/ops_norm_rope.cpp, ops_elementwise.cpp), each rounded on
// its own (device::*_rn), with glibc's expf (device::expf_libm) where the CPU calls std::exp.
#pragma once

#include <cstdint>

#include "backends/cuda/device/hd.cuh"
#include "backends/gelu_table.h"

namespace deskside::backends::cuda::device {

// ---- rms_norm ----------------------------------------------------------------------------------

// One step of the CPU's sum of squares: the square rounded to float, added in double. The CPU adds
// a row's squares in element order; a double sum of them is not associative, so the kernel adds
// them in that order too.
DESKSIDE_HD inline double rms_sum_step(double sum, float x) { return dadd_rn(sum, static_cast<double>(mul_rn(x, x))); }

// The row's scale from the finished sum: 1 / sqrt(float(sum / n) + eps).
DESKSIDE_HD inline float rms_norm_scale(double sum, int64_t n, float eps) {
    return div_rn(1.0f, sqrt_rn(add_rn(static_cast<float>(ddiv_rn(sum, static_cast<double>(n))), eps)));
}

// One output: (x * scale) * w[i], or x * scale without a weight.
DESKSIDE_HD inline float rms_norm_output(float x, float scale, const float* w, int64_t i) {
    const float v = mul_rn(x, scale);
    return w ? mul_rn(v, w[i]) : v;
}

// ---- rope --------------------------------------------------------------------------------------

// The rotation of the pair (a, b) by (c, s) = cos and sin of its angle (backends/rope_angles.h):
// a * c - b * s as fma(a, c, -(b * s)) and a * s + b * c as fma(a, s, b * c), the CPU's
// expressions (llama.cpp's, as GCC contracts them).
DESKSIDE_HD inline void rope_pair(float& a, float& b, float c, float s) {
    const float a0 = a, b0 = b;
    a = fma_rn(a0, c, -mul_rn(b0, s));
    b = fma_rn(a0, s, mul_rn(b0, c));
}

// ---- element-wise --------------------------------------------------------------------------------

DESKSIDE_HD inline float silu(float x) { return div_rn(x, add_rn(1.0f, expf_libm(-x))); }

// GELU by the table of backends/gelu_table.h (entry h: GELU(fp16 h) rounded to F16), indexed by x
// rounded to F16; 0 at or below -kGeluSaturation, x at or above it.
DESKSIDE_HD inline float gelu(float x, const float* table) {
    if (x <= -kGeluSaturation) return 0.0f;
    if (x >= kGeluSaturation) return x;
    return table[fp32_to_fp16(x)];
}

}  // namespace deskside::backends::cuda::device
