// The mixture-of-experts kernels (kernels.h): the router (device/moe_math.cuh, one token per thread), the
// expert matmul, add_id, moe_combine and swiglu_oai (device/moe_math.cuh), with the CPU backend's float
// operations (backends/cpu/ops_moe.cpp), each step rounded on its own (device::*_rn), and glibc's expf
// (device::expf_libm), so every one gives the CPU's bits (matmul_id through launch_matmul's arithmetic).
//
// matmul_id: the activations are quantized once (launch_quantize_activations, as launch_matmul does); a CTA
// computes a tile of rows (a warp each) of one output column j, reading W's rows at expert ids[j], with launch_matmul's
// per-output arithmetic (device/exact_kernel.cuh: the CPU backend's AVX2 order), so each row has the CPU's
// matmul_id bits: an expert whose n_out is a multiple of 8 is a matrix of its own to the CPU (its Q4_0 / Q4_K
// groups of 8 in the x8 chain), otherwise every row is a vec_dot (cpu_chain_rows_per_expert). Simple rather
// than fast: a column's weights are read once per column, not once per expert group of columns (no sorting by
// expert on the device yet).
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/device/exact_kernel.cuh"
#include "backends/cuda/device/moe_math.cuh"
#include "backends/cuda/kernels.h"

namespace deskside::backends::cuda {
namespace {

using namespace device;

constexpr int kThreads = 128;
constexpr unsigned kMaxGridY = 65535;

unsigned grid_y(int64_t n) { return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(n, 1), kMaxGridY)); }

__global__ void moe_route_kernel(const uint8_t* logits, size_t l_stride, int64_t n, int n_expert, int n_used,
                                 bool softmax_first, bool normalize, int32_t* ids, size_t ids_stride, uint8_t* weights,
                                 size_t w_stride) {
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= n) return;
    moe_route_token(reinterpret_cast<const float*>(logits + t * l_stride), n_expert, n_used, softmax_first, normalize,
                    reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(ids) + t * ids_stride),
                    reinterpret_cast<float*>(weights + t * w_stride));
}

constexpr int64_t kRowsPerCta = kThreads / kWarpLanes;

// grid (row tiles of an expert's n_out rows, columns); columns beyond gridDim.y loop. A row tile is
// 4 rows of a warp each, as launch_matmul's decode tile (exact_row_quantized_warp, exact_row_float).
template <class T>
__global__ void __launch_bounds__(kThreads)
    matmul_id_rows(const uint8_t* w, size_t w_stride, int64_t n_out, int64_t n_expert, int64_t k, const uint8_t* act,
                   size_t act_stride, const int32_t* ids, int64_t n_cols, int64_t x_div, int64_t chain_rows, uint8_t* y,
                   size_t y_stride) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerCta + threadIdx.x / kWarpLanes;
    if (row >= n_out) return;  // the whole warp of the row; the bodies have no __syncthreads
    for (int64_t j = blockIdx.y; j < n_cols; j += gridDim.y) {
        const int64_t e = ids[j];
        if (e < 0 || e >= n_expert) continue;  // device-side ids are not checked: the row stays unwritten
        RowTask task;
        task.w = w + (e * n_out + row) * w_stride;
        task.act = act + (j / x_div) * act_stride;
        task.act_stride = act_stride;
        task.y = reinterpret_cast<float*>(y + j * y_stride) + row;
        task.y_stride = 0;
        task.n_tok = 1;
        task.chain = row < chain_rows;
        if constexpr (T::kFloat) exact_row_float<T::kType, 1>(task, k);
        else exact_row_quantized_warp<T::kType, 1>(task, k / T::kElems);
    }
}

// Grid: x covers a row's elements, y the rows (looping beyond kMaxGridY), as the element-wise kernels.
__global__ void add_id_kernel(const uint8_t* a, size_t a_stride, const uint8_t* b, size_t b_stride, int64_t b_rows,
                              const int32_t* ids, uint8_t* y, size_t y_stride, int64_t ne0, int64_t n_rows) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= ne0) return;
    for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
        const int64_t e = ids[r];
        // An id outside the table (device-side ids are not checked) gives NaN, not a stray read.
        const float bias = e >= 0 && e < b_rows ? reinterpret_cast<const float*>(b + e * b_stride)[i] : NAN;
        reinterpret_cast<float*>(y + r * y_stride)[i] =
            add_rn(reinterpret_cast<const float*>(a + r * a_stride)[i], bias);
    }
}

__global__ void moe_combine_kernel(const uint8_t* y, size_t y_stride, const uint8_t* w, size_t w_stride, int64_t n_used,
                                   uint8_t* out, size_t out_stride, int64_t ne0, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= ne0) return;
    for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {
        const float* wt = reinterpret_cast<const float*>(w + t * w_stride);
        float acc = mul_rn(reinterpret_cast<const float*>(y + (t * n_used) * y_stride)[i], wt[0]);
        for (int64_t s = 1; s < n_used; ++s)
            acc = add_rn(acc, mul_rn(reinterpret_cast<const float*>(y + (t * n_used + s) * y_stride)[i], wt[s]));
        reinterpret_cast<float*>(out + t * out_stride)[i] = acc;
    }
}

__global__ void swiglu_oai_kernel(const uint8_t* gate, size_t g_stride, const uint8_t* up, size_t u_stride, float alpha,
                                  float limit, uint8_t* y, size_t y_stride, int64_t ne0, int64_t ne1) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= ne0) return;
    for (int64_t r = blockIdx.y; r < ne1; r += gridDim.y) {
        const float g = reinterpret_cast<const float*>(gate + r * g_stride)[i];
        const float u = reinterpret_cast<const float*>(up + r * u_stride)[i];
        reinterpret_cast<float*>(y + r * y_stride)[i] = swiglu_oai(g, u, alpha, limit);
    }
}

dim3 element_grid(int64_t ne0, int64_t rows) {
    return dim3(static_cast<unsigned>((ne0 + kThreads - 1) / kThreads), grid_y(rows));
}

}  // namespace

void launch_moe_route(cudaStream_t stream, const DevTensor& logits, const MoeRouteParams& p, int32_t* ids,
                      size_t ids_stride, const DevTensor& weights) {
    const int64_t n = logits.ne1;
    if (n <= 0) return;
    const auto ctas = static_cast<unsigned>((n + kThreads - 1) / kThreads);
    moe_route_kernel<<<ctas, kThreads, 0, stream>>>(logits.data, logits.row_stride, n, static_cast<int>(p.n_expert),
                                                    static_cast<int>(p.n_used), p.gating == MoeGating::SoftmaxThenTopK,
                                                    p.normalize, ids, ids_stride, weights.data, weights.row_stride);
}

size_t matmul_id_scratch_bytes(quant::TypeId w_type, int64_t k, int64_t x_rows) {
    return matmul_act_stride(w_type, k) * static_cast<size_t>(x_rows);
}

void launch_matmul_id(cudaStream_t stream, const DevTensor& w, int64_t n_expert, const DevTensor& x, const int32_t* ids,
                      int64_t n_used, const DevTensor& y, void* scratch) {
    const int64_t k = w.ne0, n_out = w.ne1 / n_expert, n_cols = y.ne1;
    if (n_cols <= 0 || n_out <= 0 || k <= 0) return;
    const int64_t x_div = x.ne1 == n_cols ? 1 : n_used;
    device::visit_weight_type(w.type, [&](auto traits) {
        using T = decltype(traits);
        const uint8_t* act = x.data;
        size_t act_stride = x.row_stride;
        if constexpr (T::kActType != quant::TypeId::F32) {
            launch_quantize_activations(stream, w.type, x, scratch);
            act = static_cast<const uint8_t*>(scratch);
            act_stride = matmul_act_stride(w.type, k);
        }
        const dim3 grid(static_cast<unsigned>((n_out + kRowsPerCta - 1) / kRowsPerCta), grid_y(n_cols));
        const int64_t chain_rows = device::cpu_chain_rows_per_expert(w.type, n_out);
        matmul_id_rows<T><<<grid, kThreads, 0, stream>>>(w.data, w.row_stride, n_out, n_expert, k, act, act_stride, ids,
                                                         n_cols, x_div, chain_rows, y.data, y.row_stride);
    });
}

void launch_add_id(cudaStream_t stream, const DevTensor& a, const DevTensor& b, const int32_t* ids,
                   const DevTensor& y) {
    if (a.ne0 <= 0 || a.ne1 <= 0) return;
    add_id_kernel<<<element_grid(a.ne0, a.ne1), kThreads, 0, stream>>>(a.data, a.row_stride, b.data, b.row_stride,
                                                                       b.ne1, ids, y.data, y.row_stride, a.ne0, a.ne1);
}

void launch_moe_combine(cudaStream_t stream, const DevTensor& y, const DevTensor& weights, const DevTensor& out) {
    if (out.ne0 <= 0 || out.ne1 <= 0) return;
    moe_combine_kernel<<<element_grid(out.ne0, out.ne1), kThreads, 0, stream>>>(
        y.data, y.row_stride, weights.data, weights.row_stride, weights.ne0, out.data, out.row_stride, out.ne0,
        out.ne1);
}

void launch_swiglu_oai(cudaStream_t stream, const DevTensor& gate, const DevTensor& up, float alpha, float limit,
                       const DevTensor& y) {
    if (gate.ne0 <= 0 || gate.ne1 <= 0) return;
    swiglu_oai_kernel<<<element_grid(gate.ne0, gate.ne1), kThreads, 0, stream>>>(
        gate.data, gate.row_stride, up.data, up.row_stride, alpha, limit, y.data, y.row_stride, gate.ne0, gate.ne1);
}

}  // namespace deskside::backends::cuda
