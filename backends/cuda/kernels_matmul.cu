// y = W x on the GPU (kernels.h) with the CPU backend's bits at its AVX2 level: x quantized on the
// device to W's vec_dot_type with the block code of backends/cuda/device/ (bit-identical to
// quant::activation_from_float), then every output summed in the CPU's order (device/exact_dot.cuh,
// its host model, held to the CPU backend in tests/backends/test_cuda_exact_matmul.cpp):
// - quantized W, m <= 8: a warp per weight row (device/exact_warp_row.cuh): 4 groups of 8 threads
//   compute the integers of 4 consecutive blocks side by side, several steps of them per pass, then
//   run the CPU's 8 lane chains over the pass's blocks in order;
// - quantized W, m > 8: 8 threads per weight row, thread j the CPU's int32 lane j and its float
//   chain, for a tile of 8 tokens (each weight block decoded once per tile);
//   in both, rows the CPU keeps row-interleaved (Q4_0 and Q4_K groups of 8, cpu_chain_rows) one
//   chain of the blocks' whole integer sums; the lanes meet in the CPU's horizontal sum, then the
//   offsets or mins chain;
// - F32 / F16 / BF16 W: a warp per row, thread c the CPU's float chain c (4 accumulators x 8 lanes).
// A CTA computes 4 rows (a warp each) or 16 rows (8 threads each) for a tile of 1, 4 or 8 tokens;
// the schedule and the tile only decide which threads compute an output and which outputs are
// computed together, never the bits of one (batch invariance).
//
// Speed: weights are read with 16-bit loads (block_dot.cuh), activations through the cache; the
// warp schedule keeps a pass of blocks' loads in flight per warp, coalesced 4 blocks at a time; no
// shared-memory staging and no int8 mma path.
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/device/exact_kernel.cuh"
#include "backends/cuda/kernels.h"

namespace deskside::backends::cuda {
namespace {

using namespace device;

constexpr int kThreadsPerCta = 128;
constexpr int kWarpsPerCta = kThreadsPerCta / kWarpLanes;
// Activation rows in scratch start at multiples of 16 bytes (Q8_K's levels are read as words).
constexpr size_t kActRowAlign = 16;

size_t act_row_stride(quant::TypeId act_type, int64_t k) {
    const size_t bytes = quant::row_bytes(act_type, k);
    return (bytes + kActRowAlign - 1) / kActRowAlign * kActRowAlign;
}

// ---- activation quantization: one thread per activation block (element for float types) ----

template <class T>
__global__ void quantize_activations(const uint8_t* x, size_t x_stride, int64_t k, int64_t m, uint8_t* act,
                                     size_t act_stride) {
    constexpr int kElems = T::kActElems;
    const int64_t per_row = k / kElems;
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= per_row * m) return;
    const int64_t t = i / per_row, b = i % per_row;
    const float* src = reinterpret_cast<const float*>(x + t * x_stride) + b * kElems;
    uint8_t* row = act + t * act_stride;
    if constexpr (T::kActType == quant::TypeId::F16) {
        reinterpret_cast<uint16_t*>(row)[b] = quantize_activation_f16(*src);
    } else if constexpr (T::kActType == quant::TypeId::BF16) {
        reinterpret_cast<uint16_t*>(row)[b] = quantize_activation_bf16(*src);
    } else if constexpr (!T::kFloat) {
        quantize_activation(src, reinterpret_cast<typename T::ActBlock*>(row)[b]);
    }
}

// ---- the matmul: exact_kernel.cuh's row bodies over a grid of (row tiles, token tiles) -----------

struct MatmulArgs {
    const uint8_t* w;
    size_t w_stride;
    int64_t n_out, k;
    const uint8_t* act;
    size_t act_stride;
    int64_t m;
    uint8_t* y;
    size_t y_stride;      // bytes
    int64_t chain_rows;  // rows [0, chain_rows) in the CPU's x8 chain
};

// Rows of a CTA: a warp per row (float W, and quantized W in the warp schedule), or 8 threads per
// row (quantized W, prompts).
template <class T, bool kWarpRow>
constexpr int64_t rows_per_cta() {
    return T::kFloat || kWarpRow ? kWarpsPerCta : kThreadsPerCta / kCpuLanes;
}

// kWarpRow: quantized W in exact_row_quantized_warp's schedule (ignored for float W).
template <class T, int kTokens, bool kWarpRow>
__global__ void __launch_bounds__(kThreadsPerCta) exact_matmul(MatmulArgs p) {
    constexpr int64_t kRows = rows_per_cta<T, kWarpRow>();
    constexpr int kThreadsPerRow = kThreadsPerCta / kRows;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x / kThreadsPerRow;
    if (row >= p.n_out) return;  // the whole group (warp) of the row; the bodies have no __syncthreads
    const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kTokens;
    RowTask task;
    task.w = p.w + row * p.w_stride;
    task.act = p.act + tok0 * p.act_stride;
    task.act_stride = p.act_stride;
    task.y = reinterpret_cast<float*>(p.y + tok0 * p.y_stride) + row;
    task.y_stride = p.y_stride / sizeof(float);
    task.n_tok = static_cast<int>(min(static_cast<int64_t>(kTokens), p.m - tok0));
    task.chain = row < p.chain_rows;
    if constexpr (T::kFloat) exact_row_float<T::kType, kTokens>(task, p.k);
    else if constexpr (kWarpRow) exact_row_quantized_warp<T::kType, kTokens>(task, p.k / T::kElems);
    else exact_row_quantized<T::kType, kTokens>(task, p.k / T::kElems);
}

template <class T, int kTokens, bool kWarpRow>
void launch_exact(cudaStream_t stream, const MatmulArgs& p) {
    constexpr int64_t kRows = rows_per_cta<T, kWarpRow>();
    const dim3 grid(static_cast<unsigned>((p.n_out + kRows - 1) / kRows),
                    static_cast<unsigned>((p.m + kTokens - 1) / kTokens));
    exact_matmul<T, kTokens, kWarpRow && !T::kFloat><<<grid, kThreadsPerCta, 0, stream>>>(p);
}

}  // namespace

bool matmul_supported(quant::TypeId w_type) {
    return device::visit_weight_type(w_type, [](auto) {});
}

size_t matmul_scratch_bytes(quant::TypeId w_type, int64_t k, int64_t m) {
    size_t bytes = 0;
    device::visit_weight_type(w_type, [&](auto traits) {
        using T = decltype(traits);
        if (T::kActType != quant::TypeId::F32) bytes = act_row_stride(T::kActType, k) * static_cast<size_t>(m);
    });
    return bytes;
}

size_t matmul_act_stride(quant::TypeId w_type, int64_t k) {
    size_t stride = 0;
    device::visit_weight_type(w_type, [&](auto traits) {
        using T = decltype(traits);
        if (T::kActType != quant::TypeId::F32) stride = act_row_stride(T::kActType, k);
    });
    return stride;
}

void launch_quantize_activations(cudaStream_t stream, quant::TypeId w_type, const DevTensor& x, void* scratch) {
    const int64_t k = x.ne0, m = x.ne1;
    if (m <= 0 || k <= 0) return;
    device::visit_weight_type(w_type, [&](auto traits) {
        using T = decltype(traits);
        if constexpr (T::kActType != quant::TypeId::F32) {
            const int64_t n_items = k / T::kActElems * m;
            const auto ctas = static_cast<unsigned>((n_items + kThreadsPerCta - 1) / kThreadsPerCta);
            quantize_activations<T><<<ctas, kThreadsPerCta, 0, stream>>>(
                x.data, x.row_stride, k, m, static_cast<uint8_t*>(scratch), act_row_stride(T::kActType, k));
        }
    });
}

void launch_matmul(cudaStream_t stream, const DevTensor& w, const DevTensor& x, const DevTensor& y, void* scratch) {
    const int64_t k = w.ne0, m = x.ne1;
    if (m <= 0 || w.ne1 <= 0 || k <= 0) return;
    device::visit_weight_type(w.type, [&](auto traits) {
        using T = decltype(traits);
        MatmulArgs p{w.data, w.row_stride, w.ne1, k, x.data, x.row_stride, m, y.data, y.row_stride,
                     device::cpu_chain_rows(w.type, w.ne1)};
        if constexpr (T::kActType != quant::TypeId::F32) {
            launch_quantize_activations(stream, w.type, x, scratch);
            p.act = static_cast<const uint8_t*>(scratch);
            p.act_stride = act_row_stride(T::kActType, k);
        }
        // The schedule and the tile's token count change which threads compute an output and
        // which outputs a CTA computes together, never the bits of one (batch invariance).
        // Decode and small batches: a warp per row; prompts: 8 threads per row, 8 tokens a tile.
        if (m == 1) launch_exact<T, 1, true>(stream, p);
        else if (m <= 4) launch_exact<T, 4, true>(stream, p);
        else if (m <= 8) launch_exact<T, 8, true>(stream, p);
        else launch_exact<T, 8, false>(stream, p);
    });
}

}  // namespace deskside::backends::cuda
