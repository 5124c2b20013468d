// y = W x on the GPU (kernels.h): x quantized on the device to W's vec_dot_type with the block
// code of backends/cuda/device/ (bit-identical to quant::activation_from_float), then dotted
// block by block with dp4a (quantized W) or fma chunks (F32 / F16 / BF16 W).
//
// Reduction order, the same for every m (batch invariance): the output y[t][r] is the sum over
// W's blocks (32-element chunks for float W) split across the 32 lanes of one warp: lane l adds
// the contributions of blocks l, l + 32, l + 64, ... in ascending order, starting from 0.0f, and
// the lanes' partial sums are combined by a fixed __shfl_xor butterfly (device::combine_lanes is
// its host model, tested in tests/backends/test_cuda_device_code.cpp). Each contribution is
// block_dot(), whose float steps are rounded one by one, so no compiler contraction differs
// between kernels. A warp computes a register tile of kRows weight rows x kTokens tokens with
// exactly that per-output computation, so the tile shape (mat-vec for m <= 8, the wider tile for
// prompts) changes which outputs a warp computes together, never the bits of any of them.
//
// Simple rather than fast: weight blocks are copied to thread-local storage with the widest aligned loads
// (device/load_block.cuh) and reused across the warp's tokens; activation blocks are read from
// global memory through the cache, not staged in shared memory, and there is no int8 mma path.
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/device/block_dot.cuh"
#include "backends/cuda/device/load_block.cuh"
#include "backends/cuda/kernels.h"

namespace deskside::backends::cuda {
namespace {

using namespace device;

constexpr int kThreadsPerCta = 128;
constexpr int kWarpsPerCta = kThreadsPerCta / kWarpLanes;
// Activation rows in scratch start at multiples of 16 bytes.
constexpr size_t kActRowAlign = 16;
// Up to this many tokens use the mat-vec tiles (decode); more use the prompt tiles.
constexpr int64_t kMatVecMaxTokens = 8;

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

// ---- the dot of one (weight row, token) pair's blocks, lane-partitioned ----------------------

template <class T, int kRows, int kTokens>
__global__ void __launch_bounds__(kThreadsPerCta)
    matmul_tiles(const uint8_t* w, size_t w_stride, int64_t n_out, int64_t k, const uint8_t* act, size_t act_stride,
                 int64_t m, uint8_t* y, size_t y_stride) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
    const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
    const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerCta + warp) * kRows;
    const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kTokens;
    if (row0 >= n_out) return;  // uniform across the warp
    const int n_rows = static_cast<int>(min(static_cast<int64_t>(kRows), n_out - row0));
    const int n_tok = static_cast<int>(min(static_cast<int64_t>(kTokens), m - tok0));
    const int64_t n_blocks = (k + T::kElems - 1) / T::kElems;

    float acc[kRows][kTokens];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;

    for (int64_t b = lane; b < n_blocks; b += kWarpLanes) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            if (r >= n_rows) break;
            const uint8_t* w_row = w + (row0 + r) * w_stride;
            if constexpr (T::kFloat) {
                using E = typename T::Element;
                const int n = static_cast<int>(min(static_cast<int64_t>(T::kElems), k - b * T::kElems));
                const E* we = reinterpret_cast<const E*>(w_row) + b * T::kElems;
#pragma unroll
                for (int t = 0; t < kTokens; ++t) {
                    if (t >= n_tok) break;
                    const E* ae = reinterpret_cast<const E*>(act + (tok0 + t) * act_stride) + b * T::kElems;
                    float c;
                    if constexpr (sizeof(E) == 4) c = chunk_dot(we, ae, n);
                    else c = chunk_dot(we, ae, n, T::kActType == quant::TypeId::BF16);
                    acc[r][t] = add_rn(acc[r][t], c);
                }
            } else {
                using Block = typename T::Block;
                using ActBlock = typename T::ActBlock;
                LocalBlock<Block> wb;
                load_block(wb, reinterpret_cast<const Block*>(w_row) + b);
#pragma unroll
                for (int t = 0; t < kTokens; ++t) {
                    if (t >= n_tok) break;
                    const ActBlock& ab = reinterpret_cast<const ActBlock*>(act + (tok0 + t) * act_stride)[b];
                    acc[r][t] = add_rn(acc[r][t], block_dot(wb.b, ab));
                }
            }
        }
    }

#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
            float v = acc[r][t];
#pragma unroll
            for (int offset = kWarpLanes / 2; offset > 0; offset /= 2) {
                v = add_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
            }
            if (lane == 0 && r < n_rows && t < n_tok) {
                reinterpret_cast<float*>(y + (tok0 + t) * y_stride)[row0 + r] = v;
            }
        }
    }
}

template <class T, int kRows, int kTokens>
void launch_tiles(cudaStream_t stream, const DevTensor& w, const uint8_t* act, size_t act_stride, int64_t m,
                  const DevTensor& y) {
    constexpr int64_t kRowsPerCta = static_cast<int64_t>(kRows) * kWarpsPerCta;
    const dim3 grid(static_cast<unsigned>((w.ne1 + kRowsPerCta - 1) / kRowsPerCta),
                    static_cast<unsigned>((m + kTokens - 1) / kTokens));
    matmul_tiles<T, kRows, kTokens><<<grid, kThreadsPerCta, 0, stream>>>(w.data, w.row_stride, w.ne1, w.ne0, act,
                                                                         act_stride, m, y.data, y.row_stride);
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
        const uint8_t* act = x.data;
        size_t act_stride = x.row_stride;
        if constexpr (T::kActType != quant::TypeId::F32) {
            act_stride = act_row_stride(T::kActType, k);
            const int64_t n_items = k / T::kActElems * m;
            const auto ctas = static_cast<unsigned>((n_items + kThreadsPerCta - 1) / kThreadsPerCta);
            quantize_activations<T><<<ctas, kThreadsPerCta, 0, stream>>>(x.data, x.row_stride, k, m,
                                                                         static_cast<uint8_t*>(scratch), act_stride);
            act = static_cast<const uint8_t*>(scratch);
        }
        if (m == 1) launch_tiles<T, 4, 1>(stream, w, act, act_stride, m, y);            // decode: mat-vec
        else if (m <= kMatVecMaxTokens) launch_tiles<T, 2, 8>(stream, w, act, act_stride, m, y);  // small batches
        else launch_tiles<T, 4, 8>(stream, w, act, act_stride, m, y);                   // prompts
    });
}

}  // namespace deskside::backends::cuda
