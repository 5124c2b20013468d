// The arithmetic of the CUDA attention kernel (backends/cuda/kernels_attention.cu), written once
// for the device and the host test (tests/backends/test_cuda_exact_ops.cpp), which checks it
// against the CPU backend's bytes at its AVX2 level: the score of one position, and the online
// softmax's steps of one (query, head), each with the CPU's float operations in its order.
//
// The CPU (backends/cpu/ops_attention.cpp) walks a query's positions in order with one running
// max, sum and accumulator per head, and never splits the context; its order is the spec, so the
// kernel keeps one chain per (query, head) too. What it does in parallel changes no bits: the
// scores (independent per position) and the exps. The max before position p is the prefix max of
// the scores (max is exact, so any evaluation order gives it), and the max decides each step's
// exp (softmax_step), so every step's factors are known before the sequential walk, which is then
// one float sum chain and one chain per accumulator element.
// ref: Milakov & Gimelshein, arXiv:1805.02867 (online softmax).
#pragma once

#include <cstdint>

#include "backends/cuda/device/hd.cuh"
#include "quant/blocks.h"
#include "quant/types.h"

namespace deskside::backends::cuda::device {

// ---- q . k, as the CPU's AVX2 kernels sum it ------------------------------------------------------

// The CPU's horizontal sum of an 8-lane vector (backends/cpu/dot_avx2_common.h hsum): upper and
// lower 128 bits, then (0 + 2) + (1 + 3).
DESKSIDE_HD inline float hsum8(const float* v) {
    float s[4];
    for (int i = 0; i < 4; ++i) s[i] = add_rn(v[i], v[i + 4]);
    return add_rn(add_rn(s[0], s[2]), add_rn(s[1], s[3]));
}

// F32 K (vec_dot_f32_avx2): four 8-lane FMA accumulators over steps of 32, then steps of 8 into
// the first, folded (0 + 1) + (2 + 3), hsum8, and the n % 8 tail one fma each (the CPU's explicit
// std::fma; the host test's head size 36 shows it).
DESKSIDE_HD inline float attn_dot_f32(int64_t n, const float* k, const float* q) {
    float acc[4][8] = {};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 8; ++l) acc[j][l] = fma_rn(k[i + 8 * j + l], q[i + 8 * j + l], acc[j][l]);
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) acc[0][l] = fma_rn(k[i + l], q[i + l], acc[0][l]);
    float folded[8];
    for (int l = 0; l < 8; ++l) folded[l] = add_rn(add_rn(acc[0][l], acc[1][l]), add_rn(acc[2][l], acc[3][l]));
    float sum = hsum8(folded);
    for (; i < n; ++i) sum = fma_rn(k[i], q[i], sum);
    return sum;
}

// F16 K (attn_dot_f16_avx2, backends/cpu/ops_attention_kernels.h): q already rounded to F16 (held
// as floats); four FMA accumulators of 16 lanes over steps of 64, folded 0 + 2, 1 + 3, then
// 0 + 1, reduced as a 16-lane vector (lane l + 8 plus lane l, then l + 4 plus l, then
// (0 + 2) + (1 + 3)); the n % 64 tail added in double, one float product at a time.
DESKSIDE_HD inline float attn_dot_f16(int64_t n, const uint16_t* k, const float* q) {
    constexpr int kLanes = 16, kStep = 64;
    const int64_t np = n / kStep * kStep;
    double sum = 0.0;
    if (np > 0) {
        float acc[4][kLanes] = {};
        for (int64_t i = 0; i < np; i += kStep)
            for (int j = 0; j < 4; ++j)
                for (int l = 0; l < kLanes; ++l) {
                    const int64_t e = i + j * kLanes + l;
                    acc[j][l] = fma_rn(fp16_to_fp32(k[e]), q[e], acc[j][l]);
                }
        float h[8], g[4];
        for (int l = 0; l < kLanes; ++l) acc[0][l] = add_rn(add_rn(acc[0][l], acc[2][l]), add_rn(acc[1][l], acc[3][l]));
        for (int l = 0; l < 8; ++l) h[l] = add_rn(acc[0][l + 8], acc[0][l]);
        for (int l = 0; l < 4; ++l) g[l] = add_rn(h[l + 4], h[l]);
        sum = static_cast<double>(add_rn(add_rn(g[0], g[2]), add_rn(g[1], g[3])));
    }
    for (int64_t i = np; i < n; ++i) sum = dadd_rn(sum, static_cast<double>(mul_rn(fp16_to_fp32(k[i]), q[i])));
    return static_cast<float>(sum);
}

// Q8_0 K against q quantized to Q8_0 (vec_dot_q8_0_avx2): per block, lane l of 8 holds the exact
// integer dot of elements 4l .. 4l + 3, and acc[l] += (d_k * d_q) * that, one FMA; then hsum8.
DESKSIDE_HD inline float attn_dot_q8_0(int64_t n, const quant::BlockQ8_0* k, const quant::BlockQ8_0* q) {
    float acc[8] = {};
    for (int64_t b = 0; b < n / quant::kQK; ++b) {
        const float d = mul_rn(fp16_to_fp32(k[b].d), fp16_to_fp32(q[b].d));
        for (int l = 0; l < 8; ++l) {
            int s = 0;
            for (int e = 4 * l; e < 4 * l + 4; ++e) s += static_cast<int>(k[b].qs[e]) * static_cast<int>(q[b].qs[e]);
            acc[l] = fma_rn(d, static_cast<float>(s), acc[l]);
        }
    }
    return hsum8(acc);
}

// q . k for one K head row of type KType; q in K's dot type as the kernel holds it (floats for
// F32 K, floats rounded to F16 for F16 K, Q8_0 blocks for Q8_0 K).
template <quant::TypeId KType>
DESKSIDE_HD inline float attn_qk(const void* q, const uint8_t* k, int64_t head_dim) {
    if constexpr (KType == quant::TypeId::Q8_0) {
        return attn_dot_q8_0(head_dim, reinterpret_cast<const quant::BlockQ8_0*>(k),
                             static_cast<const quant::BlockQ8_0*>(q));
    } else if constexpr (KType == quant::TypeId::F16) {
        return attn_dot_f16(head_dim, reinterpret_cast<const uint16_t*>(k), static_cast<const float*>(q));
    } else {
        return attn_dot_f32(head_dim, reinterpret_cast<const float*>(k), static_cast<const float*>(q));
    }
}

// Element d of a V head row as F32 (quant::to_float's value).
template <quant::TypeId VType>
DESKSIDE_HD inline float attn_v_element(const uint8_t* v, int64_t d) {
    if constexpr (VType == quant::TypeId::Q8_0) {
        const auto* b = reinterpret_cast<const quant::BlockQ8_0*>(v) + d / quant::kQK;
        return mul_rn(static_cast<float>(b->qs[d % quant::kQK]), fp16_to_fp32(b->d));
    } else if constexpr (VType == quant::TypeId::F16) {
        return fp16_to_fp32(reinterpret_cast<const uint16_t*>(v)[d]);
    } else {
        return reinterpret_cast<const float*>(v)[d];
    }
}

// ---- the online softmax of one (query, head) ------------------------------------------------------

// What position p does to the running state, given the max of the scores before it: the
// accumulator and sum are multiplied by `rescale` when the max moves (then `weight` is 1), else
// V is added with `weight`. exp is glibc's expf, as the CPU's std::exp calls it (expf_libm).
struct SoftmaxStep {
    float rescale = 1.0f;
    float weight = 1.0f;
    bool moved = false;
};

// The running max after `score` (the CPU's `if (s > max) max = s`).
DESKSIDE_HD inline float running_max(float max, float score) { return score > max ? score : max; }

DESKSIDE_HD inline SoftmaxStep softmax_step(float max_before, float score) {
    SoftmaxStep step;
    if (score > max_before) {
        step.rescale = expf_libm(sub_rn(max_before, score));
        step.moved = true;
    } else {
        step.weight = expf_libm(sub_rn(score, max_before));
    }
    return step;
}

// sum * rescale + weight, unfused (the CPU's ops_attention.cpp is built without FMA).
DESKSIDE_HD inline float softmax_sum(float sum, const SoftmaxStep& step) {
    return add_rn(mul_rn(sum, step.rescale), step.weight);
}

// One accumulator element: acc * rescale when the max moved, then fma(v, weight, acc); each result
// rounded to F16 when V is F16 (the CPU's attn_scale_avx2 and attn_accumulate_avx2).
DESKSIDE_HD inline float softmax_accumulate(float acc, float v, const SoftmaxStep& step, bool f16) {
    if (step.moved) {
        acc = mul_rn(acc, step.rescale);
        if (f16) acc = round_to_f16(acc);
    }
    const float r = fma_rn(v, step.weight, acc);
    return f16 ? round_to_f16(r) : r;
}

// An attention sink after the last position (softmax_step(max, sink)): the accumulator is
// rescaled without the F16 rounding when the max moves, and no value is added.
DESKSIDE_HD inline float sink_accumulate(float acc, const SoftmaxStep& step) {
    return step.moved ? mul_rn(acc, step.rescale) : acc;
}

// The output element: acc times the float 1 / sum.
DESKSIDE_HD inline float softmax_output(float acc, float sum) { return mul_rn(acc, div_rn(1.0f, sum)); }

}  // namespace deskside::backends::cuda::device
