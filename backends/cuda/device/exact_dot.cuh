// One output of a matmul in the CPU backend's float order at its AVX2 level, so that the CUDA
// kernels give its bits (docs/CUDA.md, "Matmul"): quantized models amplify last-bit differences at
// near ties, and only the CPU's order (which is ggml's) lands as close to llama.cpp as llama.cpp's
// own builds. The functions below are the host model of the kernels (kernels_matmul.cu,
// kernels_moe.cu): the kernels run the same steps, thread j of an 8-thread group in place of lane j
// (exact_kernel.cuh), and tests/backends/test_cuda_exact_matmul.cpp compares these with the CPU
// backend bit for bit.
//
// Quantized weights (block_dot.cuh gives the integer lanes), per output row:
// - rows the CPU keeps row-interleaved (cpu_chain_rows; backends/cpu/repack.h, Q4_0x8 and Q4_Kx8):
//   one chain over blocks, acc = fma(d_w * d_a, float(the block's whole integer sum), acc);
// - every other row: the CPU's vec_dot, 8 chains acc_j = fma(d_w * d_a, float(int32 lane j), acc_j),
//   met in the CPU's horizontal sum ((0+4)+(2+6)) + ((1+5)+(3+7));
// then the type's tail chain: + offsets (Q4_1, Q5_1), - mins (Q2_K, Q4_K, Q5_K), for both; the
// low-bit i-quants multiply the sum by their power of two instead (quant::kIqDotScale).
// F32 / F16 / BF16 weights: dot_float_avx2.cpp's 4 accumulators x 8 float lanes = 32 chains over
// the elements, combined per lane (0+1)+(2+3), then the horizontal sum, then the last k % 8
// products added onto it in order as the compiled CPU code adds them (float_tail).
// Every step is rounded on its own (hd.cuh); nothing depends on the batch or the tile.
// ref: backends/cpu/dot_legacy_avx2.cpp, dot_kquant_avx2.cpp, dot_float_avx2.cpp,
//      gemm_repack_avx2.cpp, dot_avx2_common.h (hsum); backends/vulkan/shaders/matmul*.comp
#pragma once

#include "backends/cuda/device/block_dot.cuh"

namespace deskside::backends::cuda::device {

// Rows [0, cpu_chain_rows) of an n_out-row matrix of `type` are the ones the CPU backend stores
// row-interleaved and sums as one chain (its AVX2 level, DESKSIDE_CPU_REPACK unset): the groups
// of 8 rows of Q4_0 and Q4_K (its Q8_0x8 and Q6_Kx8 kernels keep vec_dot's order).
inline int64_t cpu_chain_rows(quant::TypeId type, int64_t n_out) {
    return type == TypeId::Q4_0 || type == TypeId::Q4_K ? n_out / 8 * 8 : 0;
}
// matmul_id: each expert of n_out rows is a matrix of its own to the CPU when n_out is a multiple
// of 8; otherwise its groups straddle experts and it dots every row with vec_dot.
inline int64_t cpu_chain_rows_per_expert(quant::TypeId type, int64_t n_out) {
    return n_out % 8 == 0 ? cpu_chain_rows(type, n_out) : 0;
}

// The CPU's horizontal sum of 8 float lanes. The kernels run it as the xor butterfly with offsets
// 4, 2, 1 (each lane adds its partner's value to its own): float addition is commutative, so
// every lane ends with these bits.
DESKSIDE_HD inline float cpu_hsum8(const float* v) {
    return add_rn(add_rn(add_rn(v[0], v[4]), add_rn(v[2], v[6])), add_rn(add_rn(v[1], v[5]), add_rn(v[3], v[7])));
}

// The lanes' sum and the tail chain, as the CPU ends its dot.
template <Tail kTail>
DESKSIDE_HD inline float finish_dot(float lanes, float tail) {
    if constexpr (kTail == Tail::Offsets) return add_rn(lanes, tail);
    else if constexpr (kTail == Tail::Mins) return sub_rn(lanes, tail);
    else if constexpr (kTail == Tail::Scale) return mul_rn(tail, lanes);
    else return lanes;
}

// One output of a quantized matmul: weight row w, activation row a (W's vec_dot_type), n_blocks
// blocks; chain: the row is below cpu_chain_rows.
template <quant::TypeId T>
DESKSIDE_HD inline float exact_row_dot(const typename ExactDot<T>::Block* w, const typename ExactDot<T>::ActBlock* a,
                                       int64_t n_blocks, bool chain) {
    using E = ExactDot<T>;
    float acc[kCpuLanes] = {};
    float tail = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
        int sums[kCpuLanes];
        int shared = 0;
        for (int j = 0; j < kCpuLanes; ++j) {
            const typename E::Lane l = E::lane(w[b], j);
            sums[j] = E::lane_sum(l, a[b], j);
            shared += E::share(l, a[b], j);
        }
        if constexpr (E::kShare == Share::Lane0) sums[0] += shared;
        const float d = E::scale(w[b], a[b]);
        if (chain) {
            int total = 0;
            for (int j = 0; j < kCpuLanes; ++j) total += sums[j];
            acc[0] = fma_rn(d, static_cast<float>(total), acc[0]);
        } else {
            for (int j = 0; j < kCpuLanes; ++j) acc[j] = fma_rn(d, static_cast<float>(sums[j]), acc[j]);
        }
        tail = E::tail_step(w[b], a[b], shared, tail);
    }
    return finish_dot<E::kTail>(chain ? acc[0] : cpu_hsum8(acc), tail);
}

// ---- F32 / F16 / BF16 weights -------------------------------------------------------------------

inline constexpr int kFloatChains = 32;  // 4 AVX2 accumulators x 8 float lanes

// Element i of a row of W's type (or of its activation row, converted to the same type).
template <quant::TypeId T>
DESKSIDE_HD inline float float_element(const void* row, int64_t i) {
    if constexpr (T == TypeId::F32) return static_cast<const float*>(row)[i];
    else if constexpr (T == TypeId::BF16) return bf16_to_fp32(static_cast<const uint16_t*>(row)[i]);
    else return fp16_to_fp32(static_cast<const uint16_t*>(row)[i]);
}

// Chain c's sum: accumulator c / 8, float lane c % 8, over elements c, c + 32, ... below k rounded
// down to 32; chains 0-7 (accumulator 0) go on over the remaining whole steps of 8.
template <quant::TypeId T>
DESKSIDE_HD inline float float_chain(const void* w, const void* a, int64_t k, int c) {
    const int64_t whole32 = k / 32 * 32, whole8 = k / 8 * 8;
    float acc = 0.0f;
    for (int64_t i = c; i < whole32; i += kFloatChains)
        acc = fma_rn(float_element<T>(w, i), float_element<T>(a, i), acc);
    if (c < kCpuLanes) {
        for (int64_t i = whole32 + c; i < whole8; i += kCpuLanes)
            acc = fma_rn(float_element<T>(w, i), float_element<T>(a, i), acc);
    }
    return acc;
}

// The 32 chains' sum: per lane l, (acc0 + acc1) + (acc2 + acc3), then cpu_hsum8. The kernels run
// it as the xor butterfly with offsets 8, 16, 4, 2, 1 (chain c = 8 * accumulator + lane).
DESKSIDE_HD inline float combine_float_chains(const float* chains) {
    float lanes[kCpuLanes];
    for (int l = 0; l < kCpuLanes; ++l)
        lanes[l] = add_rn(add_rn(chains[l], chains[8 + l]), add_rn(chains[16 + l], chains[24 + l]));
    return cpu_hsum8(lanes);
}

// The last k % 8 products added onto the sum in order, one fma each, as the CPU's tail loop does
// (an explicit std::fma in dot_float_avx2.cpp).
template <quant::TypeId T>
DESKSIDE_HD inline float float_tail(const void* w, const void* a, int64_t k, float sum) {
    for (int64_t i = k / 8 * 8; i < k; ++i) sum = fma_rn(float_element<T>(w, i), float_element<T>(a, i), sum);
    return sum;
}

// One output of an F32 / F16 / BF16 matmul (a: the activation row converted to W's type).
template <quant::TypeId T>
DESKSIDE_HD inline float exact_float_row_dot(const void* w, const void* a, int64_t k) {
    float chains[kFloatChains];
    for (int c = 0; c < kFloatChains; ++c) chains[c] = float_chain<T>(w, a, k, c);
    return float_tail<T>(w, a, k, combine_float_chains(chains));
}

}  // namespace deskside::backends::cuda::device
