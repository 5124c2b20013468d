// The per-output arithmetic of the CUDA backend's MoE helpers (backends/cuda/kernels_moe.cu): the router of
// moe_route (one token per thread) and swiglu_oai, written once for the device and the host tests
// (tests/backends/test_cuda_exact_ops.cpp compares both with the CPU backend's bytes): the CPU backend's float
// operations (backends/cpu/ops_moe.cpp, ggml's soft_max and top-k as llama.cpp's build_moe_ffn chains them),
// with glibc's expf (device::expf_libm) where the CPU calls std::exp.
#pragma once

#include <cstdint>

#include "backends/cuda/device/hd.cuh"

namespace deskside::backends::cuda::device {

// ggml's soft_max of v[0, n) in place: max subtracted, exp, summed in double, times the float of 1 / sum.
DESKSIDE_HD inline void softmax_in_place(float* v, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; ++i) mx = mx < v[i] ? v[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
        v[i] = expf_libm(sub_rn(v[i], mx));
        sum = dadd_rn(sum, static_cast<double>(v[i]));
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int i = 0; i < n; ++i) v[i] = mul_rn(v[i], inv);
}

// One token: ids[0, n_used) the chosen experts, largest score first (ties: the lower expert), weights[0,
// n_used) theirs (MoeGating in backends/backend.h). softmax_first: scores are the softmax of the logits
// (recomputed per pass: the same float operations give the same value), else the logits, and the chosen ones
// are softmaxed. normalize (softmax_first only): weights divided by their sum (in double, clamped to 2^-14 as
// llama.cpp does).
DESKSIDE_HD inline void moe_route_token(const float* logits, int n_expert, int n_used, bool softmax_first,
                                        bool normalize, int32_t* ids, float* weights) {
    float mx = -INFINITY;
    for (int e = 0; e < n_expert; ++e) mx = mx < logits[e] ? logits[e] : mx;
    float inv = 1.0f;
    if (softmax_first) {
        double sum = 0.0;
        for (int e = 0; e < n_expert; ++e) sum = dadd_rn(sum, static_cast<double>(expf_libm(sub_rn(logits[e], mx))));
        inv = static_cast<float>(1.0 / sum);
    }
    // Top-k by repeated selection: each pass takes the best (score, expert) ranked after the previous pass's
    // choice.
    float prev_score = INFINITY;
    int prev = -1;
    for (int s = 0; s < n_used; ++s) {
        float best_score = 0.0f;
        int best = -1;
        for (int e = 0; e < n_expert; ++e) {
            const float v = softmax_first ? mul_rn(expf_libm(sub_rn(logits[e], mx)), inv) : logits[e];
            const bool after_prev = v < prev_score || (v == prev_score && e > prev);
            if (after_prev && (best < 0 || v > best_score)) {
                best_score = v;
                best = e;
            }
        }
        ids[s] = best;
        weights[s] = best_score;
        prev_score = best_score;
        prev = best;
    }
    if (!softmax_first) {
        softmax_in_place(weights, n_used);
    } else if (normalize) {
        double sum = 0.0;
        for (int s = 0; s < n_used; ++s) sum = dadd_rn(sum, static_cast<double>(weights[s]));
        const float total = static_cast<float>(sum);
        const float clamped = total < 6.103515625e-5f ? 6.103515625e-5f : total;  // 2^-14
        for (int s = 0; s < n_used; ++s) weights[s] = div_rn(weights[s], clamped);
    }
}

// gpt-oss's clamped SwiGLU of one element: g clamped above at limit (std::min(g, limit)), u to
// [-limit, limit] (std::clamp), then g / (1 + exp(alpha * -g)) * (u + 1).
DESKSIDE_HD inline float swiglu_oai(float g, float u, float alpha, float limit) {
    const float xg = limit < g ? limit : g;
    const float xu = u < -limit ? -limit : (limit < u ? limit : u);
    const float glu = div_rn(xg, add_rn(1.0f, expf_libm(mul_rn(alpha, -xg))));
    return mul_rn(glu, add_rn(xu, 1.0f));
}

}  // namespace deskside::backends::cuda::device
