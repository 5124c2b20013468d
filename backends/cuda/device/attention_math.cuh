// The scalar steps of the CUDA attention kernels (backends/cuda/kernels_attention.cu), written
// once for the device and the host test: the online softmax update of one position, the V
// accumulation, and the in-order merge of two parts of a query's positions (flash decoding).
// Within one part the steps are those of the CPU backend (backends/cpu/ops_attention.cpp), with
// its exp (correctly rounded, device::exp_rounded) and its F16 rounding of the accumulator when
// V is F16. ref: Milakov & Gimelshein, arXiv:1805.02867 (online softmax); Dao et al.,
// "Flash-Decoding for long-context inference" (2023) for the split-and-merge.
#pragma once

#include "backends/cuda/device/hd.cuh"

namespace deskside::backends::cuda::device {

// Running max and sum of one part.
struct SoftmaxState {
    float max = -INFINITY;
    float sum = 0.0f;
};

// The factors one new score applies: the accumulator and sum are multiplied by `rescale`, then
// V is added with weight `weight`.
struct SoftmaxStep {
    float rescale = 1.0f;
    float weight = 1.0f;
};

DESKSIDE_HD inline SoftmaxStep softmax_add(SoftmaxState& st, float score) {
    SoftmaxStep step;
    if (score > st.max) {
        step.rescale = exp_rounded(sub_rn(st.max, score));
        st.max = score;
    } else {
        step.weight = exp_rounded(sub_rn(score, st.max));
    }
    st.sum = add_rn(mul_rn(st.sum, step.rescale), step.weight);
    return step;
}

// One accumulator element: acc * rescale (only when the max moved), then + v * weight in one
// fma; each result rounded to F16 when V is F16, as the CPU does.
DESKSIDE_HD inline float softmax_accumulate(float acc, float v, const SoftmaxStep& step, bool moved, bool f16) {
    if (moved) {
        acc = mul_rn(acc, step.rescale);
        if (f16) acc = round_to_f16(acc);
    }
    const float r = fma_rn(v, step.weight, acc);
    return f16 ? round_to_f16(r) : r;
}

// Merge of the part (b, b_acc) after the parts already in (a, a_acc): the factors for a's and
// b's accumulators, and a updated to the merged state. Parts are merged in position order.
struct MergeFactors {
    float a = 1.0f;
    float b = 1.0f;
};

DESKSIDE_HD inline MergeFactors softmax_merge(SoftmaxState& a, const SoftmaxState& b) {
    MergeFactors f;
    if (b.max > a.max) {
        f.a = exp_rounded(sub_rn(a.max, b.max));
        a.max = b.max;
    } else {
        f.b = exp_rounded(sub_rn(b.max, a.max));
    }
    a.sum = add_rn(mul_rn(a.sum, f.a), mul_rn(b.sum, f.b));
    return f;
}

DESKSIDE_HD inline float merge_accumulator(float a_acc, float b_acc, const MergeFactors& f) {
    return add_rn(mul_rn(a_acc, f.a), mul_rn(b_acc, f.b));
}

}  // namespace deskside::backends::cuda::device
