// A warp per weight row: the decode / small-batch schedule of the exact quantized matmul
// (exact_kernel.cuh's exact_row_quantized_warp, used for m <= 8 and by matmul_id), written as
// __host__ __device__ pieces so that tests/backends/test_cuda_exact_matmul.cpp runs the same
// pieces in the same order on the host (warp_row_dot_model) and holds them to the CPU backend.
//
// Why: 8 threads walking a row's blocks one after another keep one small load in flight per
// thread; a decode step needs many. Here the warp's 4 groups of 8 threads (group g, thread j the
// CPU's lane j) take 4 consecutive blocks side by side, kSteps such steps per pass, so a pass has
// kPassBlocks blocks' loads in flight and each warp load instruction reads 4 consecutive blocks.
// The arithmetic of every output is unchanged (exact_dot.cuh's exact_row_dot):
// 1. integers, in any thread: thread (g, j) computes lane j's int32 sum, its share part and the
//    scale d_w * d_a of block base + 4u + g (pass_lane_values); the group then sums the share
//    parts and, for a chain row, the lane sums (integers: exact in any order);
// 2. floats, in order: thread (g, j) runs lane j's chain (and the tail chain) over the pass's
//    blocks in ascending order (for_each_pass_block), taking block b's scale, lane-j sum and share
//    from thread (b's group, j); the 4 groups run identical chains, so any group's result is the
//    row's, and the lanes meet in the xor butterfly 4, 2, 1 (cpu_hsum8) as before.
// Every float step is exact_row_dot's: fma_rn(scale_b, float(sum_bj), acc_j) and tail_step.
#pragma once

#include "backends/cuda/device/exact_dot.cuh"

namespace deskside::backends::cuda::device {

inline constexpr int kWarpGroups = kWarpLanes / kCpuLanes;  // blocks side by side in one step

// The pass shape for weight type T and a tile of kTokens tokens: steps of 4 blocks per pass,
// fewer for wider tiles and 256-element blocks (each step keeps its values in registers).
template <quant::TypeId T, int kTokens>
struct WarpPass {
    static constexpr int kBaseSteps = WeightTraits<T>::kElems == kQK ? 8 : 2;
    static constexpr int kSteps = kBaseSteps / kTokens > 0 ? kBaseSteps / kTokens : 1;
    static constexpr int kBlocks = kSteps * kWarpGroups;
};

// The block that group g takes in step u of the pass starting at block `base`.
DESKSIDE_HD inline int pass_block(int base, int u, int g) { return base + kWarpGroups * u + g; }

// What one thread holds after step 1 of a pass: per step u and token t, lane j's int32 sum
// (after the group sums: + Q3_K's correction on lane 0, or the whole block sum for a chain row),
// the block's share (the group's sum of share parts) and its scale.
template <quant::TypeId T, int kTokens>
struct PassValues {
    static constexpr int kSteps = WarpPass<T, kTokens>::kSteps;
    int sum[kSteps][kTokens];
    int share[kSteps][kTokens];
    float scale[kSteps][kTokens];
};

// Step 1 for thread (g, j): its lane of block pass_block(base, u, g) for every step u and each of
// the n_tok tokens (activation rows act + t * act_stride); zeros for blocks past the row's end and
// for tokens past n_tok. `share` holds the thread's share part until the group sums it.
template <quant::TypeId T, int kTokens>
DESKSIDE_HD inline void pass_lane_values(const typename ExactDot<T>::Block* w, const uint8_t* act, size_t act_stride,
                                         int n_tok, int n_blocks, int base, int g, int j,
                                         PassValues<T, kTokens>& v) {
    using E = ExactDot<T>;
    using ActBlock = typename E::ActBlock;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int u = 0; u < PassValues<T, kTokens>::kSteps; ++u) {
        const int b = pass_block(base, u, g);
        const bool in_row = b < n_blocks;
        typename E::Lane lane{};
        if (in_row) lane = E::lane(w[b], j);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int t = 0; t < kTokens; ++t) {
            v.sum[u][t] = v.share[u][t] = 0;
            v.scale[u][t] = 0.0f;
            if (!in_row || t >= n_tok) continue;
            const ActBlock& ab = reinterpret_cast<const ActBlock*>(act + t * act_stride)[b];
            v.sum[u][t] = E::lane_sum(lane, ab, j);
            v.share[u][t] = E::share(lane, ab, j);
            v.scale[u][t] = E::scale(w[b], ab);
        }
    }
}

// Step 1's end for one value: `share_total` the group's sum of share parts, `lane_total` the
// group's sum of (lane sum + Q3_K's correction on lane 0), taken only for chain rows.
template <quant::TypeId T>
DESKSIDE_HD inline int lane_with_share(int sum, int share_total, int j) {
    return ExactDot<T>::kShare == Share::Lane0 && j == 0 ? sum + share_total : sum;
}

// Calls f(u, g, b) for the pass's blocks b below n_blocks in ascending order (g: the group that
// holds b). u, g and b do not depend on the calling thread, so a warp takes every branch here
// together (the device's f may shuffle).
template <quant::TypeId T, int kTokens, class F>
DESKSIDE_HD inline void for_each_pass_block(int base, int n_blocks, F&& f) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int u = 0; u < WarpPass<T, kTokens>::kSteps; ++u) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int g = 0; g < kWarpGroups; ++g) {
            const int b = pass_block(base, u, g);
            if (b < n_blocks) f(u, g, b);
        }
    }
}

// Step 2 for one block and token: exact_row_dot's float steps for lane j's chain and the tail.
template <quant::TypeId T>
DESKSIDE_HD inline void fold_block(const typename ExactDot<T>::Block& wb, const typename ExactDot<T>::ActBlock& ab,
                                   float scale, int sum, int share, float& acc, float& tail) {
    acc = fma_rn(scale, static_cast<float>(sum), acc);
    tail = ExactDot<T>::tail_step(wb, ab, share, tail);
}

// Host model of exact_row_quantized_warp for one weight row and n_tok (<= kTokens) tokens: the
// warp's 32 threads simulated step by step with the pieces above (the device's shuffles become
// reads of the other threads' values). Writes out[t] for t < n_tok.
template <quant::TypeId T, int kTokens>
inline void warp_row_dot_model(const typename ExactDot<T>::Block* w, const uint8_t* act, size_t act_stride, int n_tok,
                               int n_blocks, bool chain, float* out) {
    using E = ExactDot<T>;
    using ActBlock = typename E::ActBlock;
    constexpr int kSteps = WarpPass<T, kTokens>::kSteps;
    float acc[kWarpLanes][kTokens] = {}, tail[kWarpLanes][kTokens] = {};
    for (int base = 0; base < n_blocks; base += WarpPass<T, kTokens>::kBlocks) {
        PassValues<T, kTokens> v[kWarpLanes];
        for (int th = 0; th < kWarpLanes; ++th)
            pass_lane_values<T, kTokens>(w, act, act_stride, n_tok, n_blocks, base, th / kCpuLanes, th % kCpuLanes,
                                         v[th]);
        // The group sums (the device's group_sum shuffles).
        for (int g = 0; g < kWarpGroups; ++g) {
            for (int u = 0; u < kSteps; ++u) {
                for (int t = 0; t < kTokens; ++t) {
                    int share = 0, total = 0;
                    for (int j = 0; j < kCpuLanes; ++j) share += v[g * kCpuLanes + j].share[u][t];
                    for (int j = 0; j < kCpuLanes; ++j) {
                        PassValues<T, kTokens>& mine = v[g * kCpuLanes + j];
                        mine.share[u][t] = share;
                        mine.sum[u][t] = lane_with_share<T>(mine.sum[u][t], share, j);
                        total += mine.sum[u][t];
                    }
                    if (chain) {
                        for (int j = 0; j < kCpuLanes; ++j) v[g * kCpuLanes + j].sum[u][t] = total;
                    }
                }
            }
        }
        // Every thread's chains, reading block b's values from thread (b's group, j).
        for (int th = 0; th < kWarpLanes; ++th) {
            const int j = th % kCpuLanes;
            for_each_pass_block<T, kTokens>(base, n_blocks, [&](int u, int g, int b) {
                const PassValues<T, kTokens>& src = v[g * kCpuLanes + j];
                for (int t = 0; t < n_tok; ++t) {
                    const ActBlock& ab = reinterpret_cast<const ActBlock*>(act + t * act_stride)[b];
                    fold_block<T>(w[b], ab, src.scale[u][t], src.sum[u][t], src.share[u][t], acc[th][t], tail[th][t]);
                }
            });
        }
    }
    // The lanes meet (chain rows: every lane holds the chain), in every group alike; group 1's
    // result is taken to show that it equals group 0's.
    for (int t = 0; t < n_tok; ++t) {
        float lanes[kCpuLanes];
        for (int j = 0; j < kCpuLanes; ++j) lanes[j] = acc[kCpuLanes + j][t];
        out[t] = finish_dot<E::kTail>(chain ? lanes[0] : cpu_hsum8(lanes), tail[kCpuLanes][t]);
    }
}

}  // namespace deskside::backends::cuda::device
