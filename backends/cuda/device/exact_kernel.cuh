// Device-only: the thread-level bodies of the exact matmul kernels (kernels_matmul.cu, and
// kernels_moe.cu's matmul_id), which run exact_dot.cuh's host model with threads in place of the
// CPU's lanes:
// - quantized W, m <= 8 and matmul_id (exact_row_quantized_warp): a warp per weight row, its 4
//   groups of 8 threads computing the integers of 4 consecutive blocks side by side, then every
//   group running the 8 lanes' float chains over those blocks in order with values shuffled in
//   (exact_warp_row.cuh, whose host model the tests hold to the CPU);
// - quantized W, prompts (exact_row_quantized): a group of 8 consecutive threads computes one
//   weight row for up to kTokens tokens; thread j holds the CPU's lane j (its levels decoded once
//   per block for every token, its int32 lane sum and its float chain).
//   In both, integers that the model sums over lanes (a chain row's block sum, the mins' sum,
//   Q3_K's correction) are summed across the group with shuffles, exact in any order; the lanes'
//   float chains meet in the xor butterfly 4, 2, 1, which is cpu_hsum8.
// - F32 / F16 / BF16 W: a warp computes one row; thread c holds float chain c (float_chain), the
//   chains meet in the xor butterfly 8, 16, 4, 2, 1 (combine_float_chains) and thread 0 adds the
//   tail (float_tail).
// A weight block is read by its group together (each thread reads its 4-byte slices of every
// 32-element piece, so the group's loads cover the block contiguously) and reused for every
// token of the tile; the bits of an output depend on its row alone, never on kTokens.
#pragma once

#include "backends/cuda/device/exact_warp_row.cuh"

namespace deskside::backends::cuda::device {

// One weight row and up to kTokens activation rows.
struct RowTask {
    const uint8_t* w;    // the weight row
    const uint8_t* act;  // token 0's activation row (W's vec_dot_type; F32 W: x itself)
    size_t act_stride;   // bytes between tokens' activation rows
    float* y;            // token 0's output for this row
    size_t y_stride;     // floats between tokens' outputs
    int n_tok;           // tokens of the tile (<= kTokens), the same for every thread of the CTA
    bool chain;          // the row is below cpu_chain_rows
};

inline constexpr unsigned kFullWarp = 0xFFFFFFFFu;

// Sum of v over the 8 threads of this thread's group (integers: exact in any order); mask: the
// group's threads (group_mask()), or kFullWarp where every group of the warp sums its own.
__device__ inline int group_sum(int v, unsigned mask) {
    for (int offset = kCpuLanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(mask, v, offset, kCpuLanes);
    return v;
}

// cpu_hsum8 of the group's 8 values, every thread getting the same bits; mask as group_sum's.
__device__ inline float group_hsum(float v, unsigned mask) {
    for (int offset = kCpuLanes / 2; offset > 0; offset /= 2)
        v = add_rn(v, __shfl_xor_sync(mask, v, offset, kCpuLanes));
    return v;
}

// The 8-thread group of this thread: its lane mask within the warp.
__device__ inline unsigned group_mask() {
    return 0xFFu << (kCpuLanes * ((threadIdx.x % kWarpLanes) / kCpuLanes));
}

// exact_row_dot for task's row and tokens, thread j = threadIdx.x % 8 of the group.
template <quant::TypeId kType, int kTokens>
__device__ inline void exact_row_quantized(const RowTask& task, int64_t n_blocks) {
    using E = ExactDot<kType>;
    using Block = typename E::Block;
    using ActBlock = typename E::ActBlock;
    const int j = static_cast<int>(threadIdx.x % kCpuLanes);
    const unsigned mask = group_mask();
    const Block* w = reinterpret_cast<const Block*>(task.w);
    float acc[kTokens], tail[kTokens];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[t] = tail[t] = 0.0f;

    for (int64_t b = 0; b < n_blocks; ++b) {
        const Block& wb = w[b];
        const typename E::Lane lane = E::lane(wb, j);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
            if (t >= task.n_tok) break;
            const ActBlock& ab = reinterpret_cast<const ActBlock*>(task.act + t * task.act_stride)[b];
            int sum = E::lane_sum(lane, ab, j);
            int shared = 0;
            if constexpr (E::kShare != Share::None) shared = group_sum(E::share(lane, ab, j), mask);
            if constexpr (E::kShare == Share::Lane0) sum += j == 0 ? shared : 0;
            if (task.chain) sum = group_sum(sum, mask);
            acc[t] = fma_rn(E::scale(wb, ab), static_cast<float>(sum), acc[t]);
            tail[t] = E::tail_step(wb, ab, shared, tail[t]);
        }
    }

#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
        if (t >= task.n_tok) break;
        const float lanes = task.chain ? acc[t] : group_hsum(acc[t], mask);
        if (j == 0) task.y[t * task.y_stride] = finish_dot<E::kTail>(lanes, tail[t]);
    }
}

// exact_row_dot for task's row and tokens, the warp's lane threadIdx.x % 32 = thread (g, j) of
// exact_warp_row.cuh's schedule (warp_row_dot_model is this function on the host). Every thread
// of the warp reaches every shuffle: the only branches around them (for_each_pass_block's block
// bound, t < n_tok, task.chain) are the same for the whole warp.
template <quant::TypeId kType, int kTokens>
__device__ inline void exact_row_quantized_warp(const RowTask& task, int64_t n_blocks) {
    using E = ExactDot<kType>;
    using ActBlock = typename E::ActBlock;
    using Pass = WarpPass<kType, kTokens>;
    const int lane_id = static_cast<int>(threadIdx.x % kWarpLanes);
    const int g = lane_id / kCpuLanes, j = lane_id % kCpuLanes;
    const auto* w = reinterpret_cast<const typename E::Block*>(task.w);
    float acc[kTokens], tail[kTokens];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[t] = tail[t] = 0.0f;

    const int n_row_blocks = static_cast<int>(n_blocks);  // k / 32 < 2^31
    for (int base = 0; base < n_row_blocks; base += Pass::kBlocks) {
        // Step 1: this thread's integers of its blocks (all loads of the pass in flight together).
        PassValues<kType, kTokens> v;
        pass_lane_values<kType, kTokens>(w, task.act, task.act_stride, task.n_tok, n_row_blocks, base, g, j, v);
#pragma unroll
        for (int u = 0; u < Pass::kSteps; ++u) {
#pragma unroll
            for (int t = 0; t < kTokens; ++t) {
                if constexpr (E::kShare != Share::None) v.share[u][t] = group_sum(v.share[u][t], kFullWarp);
                v.sum[u][t] = lane_with_share<kType>(v.sum[u][t], v.share[u][t], j);
                if (task.chain) v.sum[u][t] = group_sum(v.sum[u][t], kFullWarp);
            }
        }
        // Step 2: the chains over the pass's blocks in order, block b's values from thread (b's group, j).
        for_each_pass_block<kType, kTokens>(base, n_row_blocks, [&](int u, int src_g, int b) {
            const int src = src_g * kCpuLanes + j;
#pragma unroll
            for (int t = 0; t < kTokens; ++t) {
                const float scale = __shfl_sync(kFullWarp, v.scale[u][t], src);
                const int sum = __shfl_sync(kFullWarp, v.sum[u][t], src);
                const int share = E::kShare == Share::None ? 0 : __shfl_sync(kFullWarp, v.share[u][t], src);
                if (t < task.n_tok) {
                    const ActBlock& ab = reinterpret_cast<const ActBlock*>(task.act + t * task.act_stride)[b];
                    fold_block<kType>(w[b], ab, scale, sum, share, acc[t], tail[t]);
                }
            }
        });
    }

#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
        if (t >= task.n_tok) break;
        const float lanes = task.chain ? acc[t] : group_hsum(acc[t], kFullWarp);
        if (lane_id == 0) task.y[t * task.y_stride] = finish_dot<E::kTail>(lanes, tail[t]);
    }
}

// exact_float_row_dot for task's row and tokens, thread c = threadIdx.x % 32 of the warp.
template <quant::TypeId kType, int kTokens>
__device__ inline void exact_row_float(const RowTask& task, int64_t k) {
    const int c = static_cast<int>(threadIdx.x % kWarpLanes);
    const int64_t whole32 = k / 32 * 32, whole8 = k / 8 * 8;
    float acc[kTokens];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
    const auto step = [&](int64_t i) {
        const float wv = float_element<kType>(task.w, i);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
            if (t >= task.n_tok) break;
            acc[t] = fma_rn(wv, float_element<kType>(task.act + t * task.act_stride, i), acc[t]);
        }
    };
    for (int64_t i = c; i < whole32; i += kFloatChains) step(i);
    if (c < kCpuLanes) {
        for (int64_t i = whole32 + c; i < whole8; i += kCpuLanes) step(i);
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
        if (t >= task.n_tok) break;
        float v = acc[t];
        for (const int offset : {8, 16, 4, 2, 1}) v = add_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
        if (c == 0) task.y[t * task.y_stride] = float_tail<kType>(task.w, task.act + t * task.act_stride, k, v);
    }
}

}  // namespace deskside::backends::cuda::device
