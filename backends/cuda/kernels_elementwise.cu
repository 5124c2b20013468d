// Element-wise kernels (kernels.h): add, mul (b broadcast when it has one row), scale, silu, gelu.
// Each output is one float expression of its inputs with the CPU backend's operations in its
// order (backends/cpu/ops_elementwise.cpp), every step rounded on its own (device::*_rn), so all
// five give the CPU's bits: silu with glibc's expf (device::expf_libm), gelu by the lookup in
// backends/gelu_table.h (copied once per device into g_gelu_table). silu and gelu are
// device/exact_ops.cuh, checked against the CPU on the host (tests/backends/test_cuda_exact_ops.cpp).
#include <cuda_runtime.h>

#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device/exact_ops.cuh"
#include "backends/cuda/kernels.h"
#include "backends/gelu_table.h"

namespace deskside::backends::cuda {
namespace {

using namespace device;

constexpr int kThreads = 256;
constexpr unsigned kMaxGridY = 65535;

// GELU(fp16 h) rounded to F16, for every h (backends/gelu_table.h); filled by load_gelu_table.
__device__ float g_gelu_table[1 << 16];

enum class Unary { Scale, Silu, Gelu };
enum class Binary { Add, Mul };

template <Unary kOp>
__device__ inline float unary(float v, float s) {
    if constexpr (kOp == Unary::Scale) {
        return mul_rn(v, s);
    } else if constexpr (kOp == Unary::Silu) {
        return silu(v);
    } else {
        return gelu(v, g_gelu_table);
    }
}

// Grid: x covers a row's elements, y the rows (looping when there are more than kMaxGridY).
template <Unary kOp>
__global__ void unary_kernel(const uint8_t* x, size_t x_stride, uint8_t* y, size_t y_stride, int64_t ne0,
                             int64_t ne1, float s) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= ne0) return;
    for (int64_t r = blockIdx.y; r < ne1; r += gridDim.y) {
        const float v = reinterpret_cast<const float*>(x + r * x_stride)[i];
        reinterpret_cast<float*>(y + r * y_stride)[i] = unary<kOp>(v, s);
    }
}

template <Binary kOp>
__global__ void binary_kernel(const uint8_t* a, size_t a_stride, const uint8_t* b, size_t b_stride, uint8_t* y,
                              size_t y_stride, int64_t ne0, int64_t ne1) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= ne0) return;
    for (int64_t r = blockIdx.y; r < ne1; r += gridDim.y) {
        const float u = reinterpret_cast<const float*>(a + r * a_stride)[i];
        const float v = reinterpret_cast<const float*>(b + r * b_stride)[i];
        reinterpret_cast<float*>(y + r * y_stride)[i] = kOp == Binary::Add ? add_rn(u, v) : mul_rn(u, v);
    }
}

dim3 grid_for(int64_t ne0, int64_t ne1) {
    return dim3(static_cast<unsigned>((ne0 + kThreads - 1) / kThreads),
                static_cast<unsigned>(std::min<int64_t>(ne1, kMaxGridY)));
}

template <Unary kOp>
void launch_unary(cudaStream_t stream, const DevTensor& x, const DevTensor& y, float s) {
    if (x.ne0 <= 0 || x.ne1 <= 0) return;
    unary_kernel<kOp><<<grid_for(x.ne0, x.ne1), kThreads, 0, stream>>>(x.data, x.row_stride, y.data, y.row_stride,
                                                                        x.ne0, x.ne1, s);
}

template <Binary kOp>
void launch_binary(cudaStream_t stream, const DevTensor& a, const DevTensor& b, const DevTensor& y) {
    if (a.ne0 <= 0 || a.ne1 <= 0) return;
    // A one-row b is read again for every row: stride 0.
    const size_t b_stride = b.ne1 == 1 ? 0 : b.row_stride;
    binary_kernel<kOp><<<grid_for(a.ne0, a.ne1), kThreads, 0, stream>>>(a.data, a.row_stride, b.data, b_stride, y.data,
                                                                         y.row_stride, a.ne0, a.ne1);
}

}  // namespace

void load_gelu_table() {
    static const std::vector<float> table = gelu_f16_table();
    cuda_check(cudaMemcpyToSymbol(g_gelu_table, table.data(), table.size() * sizeof(float)), "loading the GELU table");
}

void launch_silu(cudaStream_t stream, const DevTensor& x, const DevTensor& y) {
    launch_unary<Unary::Silu>(stream, x, y, 0.0f);
}
void launch_gelu(cudaStream_t stream, const DevTensor& x, const DevTensor& y) {
    launch_unary<Unary::Gelu>(stream, x, y, 0.0f);
}
void launch_scale(cudaStream_t stream, const DevTensor& x, float s, const DevTensor& y) {
    launch_unary<Unary::Scale>(stream, x, y, s);
}
void launch_add(cudaStream_t stream, const DevTensor& a, const DevTensor& b, const DevTensor& y) {
    launch_binary<Binary::Add>(stream, a, b, y);
}
void launch_mul(cudaStream_t stream, const DevTensor& a, const DevTensor& b, const DevTensor& y) {
    launch_binary<Binary::Mul>(stream, a, b, y);
}

}  // namespace deskside::backends::cuda
