// rms_norm and rope kernels (kernels.h), with the CPU backend's bits (backends/cpu/ops_norm_rope.cpp);
// the per-output arithmetic is device/exact_ops.cuh, checked against the CPU on the host
// (tests/backends/test_cuda_exact_ops.cpp).
//
// rms_norm, one CTA of kNormThreads per row. The CPU adds the squares (rounded to float) in double
// in element order, and a double sum is not associative, so one thread adds them in that order:
// the CTA stages kNormThreads values at a time in shared memory and thread 0 adds their squares.
// The rest is parallel: mean = float(sum / n); s = 1 / sqrt(mean + eps); y = (x * s) * w.
//
// rope: one thread per (token, head, pair). The rotations are the table the backend built on
// the host with backends/rope_angles.h (the CPU's cos and sin); the rotation is the CPU's
// expression (device::rope_pair).
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/device/exact_ops.cuh"
#include "backends/cuda/kernels.h"

namespace deskside::backends::cuda {
namespace {

using namespace device;

constexpr int kNormThreads = 256;
constexpr unsigned kMaxGridX = 1u << 30;
constexpr int kRopeThreads = 256;

__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(const uint8_t* x, size_t x_stride, const float* w, uint8_t* y, size_t y_stride, int64_t ne0,
                    int64_t n_rows, float eps) {
    __shared__ float staged[kNormThreads];
    __shared__ float row_scale;
    const int t = static_cast<int>(threadIdx.x);
    for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
        const float* in = reinterpret_cast<const float*>(x + r * x_stride);
        double sum = 0.0;  // thread 0's
        for (int64_t c = 0; c < ne0; c += kNormThreads) {
            if (c + t < ne0) staged[t] = in[c + t];
            __syncthreads();
            if (t == 0) {
                const int n = static_cast<int>(min(static_cast<int64_t>(kNormThreads), ne0 - c));
                for (int i = 0; i < n; ++i) sum = rms_sum_step(sum, staged[i]);
            }
            __syncthreads();  // staged is refilled by the next chunk
        }
        if (t == 0) row_scale = rms_norm_scale(sum, ne0, eps);
        __syncthreads();
        const float s = row_scale;
        float* out = reinterpret_cast<float*>(y + r * y_stride);
        for (int64_t i = t; i < ne0; i += kNormThreads) out[i] = rms_norm_output(in[i], s, w, i);
        __syncthreads();  // row_scale is reused by the next row
    }
}

// rotations: [n_ctx][n_rot / 2][cos, sin].
__global__ void rope_kernel(uint8_t* x, size_t x_stride, const int32_t* positions, const float* rotations,
                            int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t half, bool neox,
                            int64_t n_ctx) {
    const int64_t per_token = n_head * half;
    const int64_t total = n_tokens * per_token;
    for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < total;
         g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t token = g / per_token;
        const int64_t rem = g - token * per_token;
        const int64_t h = rem / half, i = rem - h * half;
        const int32_t pos = positions[token];
        // The engine checks positions before uploading them; a bad one leaves its row as it was
        // rather than reading outside the table.
        if (pos < 0 || pos >= n_ctx) continue;
        const float* rot = rotations + (static_cast<int64_t>(pos) * half + i) * 2;
        const float c = rot[0], s = rot[1];
        float* v = reinterpret_cast<float*>(x + token * x_stride) + h * head_dim;
        const int64_t i0 = neox ? i : 2 * i;
        const int64_t i1 = neox ? i + half : 2 * i + 1;
        float a = v[i0], b = v[i1];
        rope_pair(a, b, c, s);
        v[i0] = a;
        v[i1] = b;
    }
}

}  // namespace

void launch_rms_norm(cudaStream_t stream, const DevTensor& x, const DevTensor& weight, float eps, const DevTensor& y) {
    if (x.ne0 <= 0 || x.ne1 <= 0) return;
    const auto ctas = static_cast<unsigned>(std::min<int64_t>(x.ne1, kMaxGridX));
    rms_norm_kernel<<<ctas, kNormThreads, 0, stream>>>(x.data, x.row_stride,
                                                       reinterpret_cast<const float*>(weight.data), y.data,
                                                       y.row_stride, x.ne0, x.ne1, eps);
}

void launch_rope(cudaStream_t stream, const DevTensor& x, const int32_t* positions, const float* rotations,
                 const RopeParams& p) {
    const int64_t half = p.n_rot / 2;
    const int64_t total = x.ne1 * p.n_head * half;
    if (total <= 0) return;
    const auto ctas = static_cast<unsigned>(std::min<int64_t>((total + kRopeThreads - 1) / kRopeThreads, kMaxGridX));
    rope_kernel<<<ctas, kRopeThreads, 0, stream>>>(x.data, x.row_stride, positions, rotations, x.ne1, p.n_head,
                                                   p.head_dim, half, p.neox, p.n_ctx);
}

}  // namespace deskside::backends::cuda
