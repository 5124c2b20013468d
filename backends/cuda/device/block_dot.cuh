// The dot product of one weight block with one activation block (the activation already in the
// weight type's vec_dot_type), for every quantized weight type, plus the float "chunk" dots of
// F32 / F16 / BF16 weights and the traits that tie a weight type to its block and activation types.
//
// Each quantized dot computes the block's integer sums with dp4a on 4 packed int8 (exact, so the
// order of the integer additions does not matter) and then applies the scales with exactly the
// float operations of quant/'s scalar reference vec_dot (quant/ref_*.cpp) for one block. Summing
// these contributions in ascending block order from 0.0f therefore reproduces the reference
// vec_dot bit for bit; the kernels sum them in the fixed lane order of lane_partition_dot.
#pragma once

#include "backends/cuda/device/quantize_activation.cuh"
#include "quant/types.h"

namespace deskside::backends::cuda::device {

inline constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;

// Bits 0-3 of x to bit 4 of bytes 0-3 (the fifth bit of four Q5 elements).
DESKSIDE_HD inline uint32_t spread_bits4(uint32_t x) {
    return ((x & 1u) << 4) | ((x & 2u) << 11) | ((x & 4u) << 18) | ((x & 8u) << 25);
}

// ---- 32-element blocks ---------------------------------------------------------------------

DESKSIDE_HD inline float block_dot(const BlockQ4_0& w, const BlockQ8_0& a) {
    int sumi = 0, asum = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t q = load_u32(w.qs + 4 * i);
        const uint32_t a_lo = load_u32(a.qs + 4 * i), a_hi = load_u32(a.qs + 16 + 4 * i);
        sumi = dp4a(q & kLowNibbles, a_lo, sumi);
        sumi = dp4a((q >> 4) & kLowNibbles, a_hi, sumi);
        asum += byte_sum(a_lo) + byte_sum(a_hi);
    }
    sumi -= 8 * asum;
    return mul_rn(mul_rn(static_cast<float>(sumi), fp16_to_fp32(w.d)), fp16_to_fp32(a.d));
}

DESKSIDE_HD inline float block_dot(const BlockQ4_1& w, const BlockQ8_1& a) {
    int sumi = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t q = load_u32(w.qs + 4 * i);
        sumi = dp4a(q & kLowNibbles, load_u32(a.qs + 4 * i), sumi);
        sumi = dp4a((q >> 4) & kLowNibbles, load_u32(a.qs + 16 + 4 * i), sumi);
    }
    return add_rn(mul_rn(mul_rn(fp16_to_fp32(w.d), fp16_to_fp32(a.d)), static_cast<float>(sumi)),
                  mul_rn(fp16_to_fp32(w.m), fp16_to_fp32(a.s)));
}

// Sum of the 5-bit levels (0..31) times the activation levels, and the sum of the activations.
DESKSIDE_HD inline int q5_levels_dot(const uint8_t* qs, const uint8_t* qh_bytes, const int8_t* a, int* asum) {
    const uint32_t qh = load_u32(qh_bytes);
    int sumi = 0;
    *asum = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t q = load_u32(qs + 4 * i);
        const uint32_t lo = (q & kLowNibbles) | spread_bits4((qh >> (4 * i)) & 0xF);
        const uint32_t hi = ((q >> 4) & kLowNibbles) | spread_bits4((qh >> (16 + 4 * i)) & 0xF);
        const uint32_t a_lo = load_u32(a + 4 * i), a_hi = load_u32(a + 16 + 4 * i);
        sumi = dp4a(lo, a_lo, sumi);
        sumi = dp4a(hi, a_hi, sumi);
        *asum += byte_sum(a_lo) + byte_sum(a_hi);
    }
    return sumi;
}

DESKSIDE_HD inline float block_dot(const BlockQ5_0& w, const BlockQ8_0& a) {
    int asum = 0;
    const int levels = q5_levels_dot(w.qs, w.qh, a.qs, &asum);
    const int sumi = levels - 16 * asum;
    return mul_rn(mul_rn(fp16_to_fp32(w.d), fp16_to_fp32(a.d)), static_cast<float>(sumi));
}

DESKSIDE_HD inline float block_dot(const BlockQ5_1& w, const BlockQ8_1& a) {
    int asum = 0;
    const int sumi = q5_levels_dot(w.qs, w.qh, a.qs, &asum);
    return add_rn(mul_rn(mul_rn(fp16_to_fp32(w.d), fp16_to_fp32(a.d)), static_cast<float>(sumi)),
                  mul_rn(fp16_to_fp32(w.m), fp16_to_fp32(a.s)));
}

DESKSIDE_HD inline float block_dot(const BlockQ8_0& w, const BlockQ8_0& a) {
    int sumi = 0;
    for (int i = 0; i < 8; ++i) sumi = dp4a(load_u32(w.qs + 4 * i), load_u32(a.qs + 4 * i), sumi);
    return mul_rn(static_cast<float>(sumi), mul_rn(fp16_to_fp32(w.d), fp16_to_fp32(a.d)));
}

DESKSIDE_HD inline float block_dot(const BlockIq4Nl& w, const BlockQ8_0& a) {
    int sumi = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t q = load_u32(w.qs + 4 * i);
        sumi = dp4a(iq4_levels4(q & kLowNibbles), load_u32(a.qs + 4 * i), sumi);
        sumi = dp4a(iq4_levels4((q >> 4) & kLowNibbles), load_u32(a.qs + 16 + 4 * i), sumi);
    }
    return mul_rn(mul_rn(fp16_to_fp32(a.d), fp16_to_fp32(w.d)), static_cast<float>(sumi));
}

// ---- 256-element super-blocks (Q8_K activations) --------------------------------------------

// Q2_K and Q3_K group g (16 elements): 4 words of 2-bit fields, bytes 32 * (g / 8) + 16 * (g % 2)
// onwards, at bit 2 * ((g % 8) / 2).
DESKSIDE_HD inline uint32_t two_bit_word(const uint8_t* qs, int g, int i) {
    return (load_u32(qs + 32 * (g / 8) + 16 * (g % 2) + 4 * i) >> (2 * ((g % 8) / 2))) & 0x03030303u;
}

DESKSIDE_HD inline float block_dot(const BlockQ2_K& w, const BlockQ8_K& a) {
    int sum_mins = 0, isum = 0;
    for (int g = 0; g < 16; ++g) {
        int group = 0;
        for (int i = 0; i < 4; ++i) group = dp4a(two_bit_word(w.qs, g, i), load_u32(a.qs + 16 * g + 4 * i), group);
        isum += (w.scales[g] & 0xF) * group;
        sum_mins += a.bsums[g] * (w.scales[g] >> 4);
    }
    const float dall = mul_rn(a.d, fp16_to_fp32(w.d));
    const float dmin = mul_rn(a.d, fp16_to_fp32(w.dmin));
    return sub_rn(mul_rn(dall, static_cast<float>(isum)), mul_rn(dmin, static_cast<float>(sum_mins)));
}

DESKSIDE_HD inline float block_dot(const BlockQ3_K& w, const BlockQ8_K& a) {
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
        int group = 0, asum = 0;
        for (int i = 0; i < 4; ++i) {
            const uint32_t high = (load_u32(w.hmask + 16 * (g % 2) + 4 * i) >> (g / 2)) & 0x01010101u;
            const uint32_t av = load_u32(a.qs + 16 * g + 4 * i);
            group = dp4a(two_bit_word(w.qs, g, i) | (high << 2), av, group);  // levels 0..7 = value + 4
            asum += byte_sum(av);
        }
        isum += q3k_scale(g, w.scales) * (group - 4 * asum);
    }
    return mul_rn(mul_rn(fp16_to_fp32(w.d), a.d), static_cast<float>(isum));
}

// Q4_K / Q5_K: isum and sum_mins over the 8 groups of 32; `qh` is null for Q4_K.
DESKSIDE_HD inline float k4_block_dot(uint16_t wd, uint16_t wdmin, const uint8_t* scales, const uint8_t* qs,
                                      const uint8_t* qh, const BlockQ8_K& a) {
    int isum = 0, sum_mins = 0;
    for (int g = 0; g < 8; ++g) {
        int sc, m;
        k4_scale_min(g, scales, &sc, &m);
        int group = 0;
        for (int i = 0; i < 8; ++i) {
            uint32_t q = (load_u32(qs + 32 * (g / 2) + 4 * i) >> (4 * (g % 2))) & kLowNibbles;
            if (qh != nullptr) q |= ((load_u32(qh + 4 * i) >> g) & 0x01010101u) << 4;
            group = dp4a(q, load_u32(a.qs + 32 * g + 4 * i), group);
        }
        isum += sc * group;
        sum_mins += m * (a.bsums[2 * g] + a.bsums[2 * g + 1]);
    }
    const float d = mul_rn(fp16_to_fp32(wd), a.d);
    const float dmin = mul_rn(fp16_to_fp32(wdmin), a.d);
    return sub_rn(mul_rn(d, static_cast<float>(isum)), mul_rn(dmin, static_cast<float>(sum_mins)));
}

DESKSIDE_HD inline float block_dot(const BlockQ4_K& w, const BlockQ8_K& a) {
    return k4_block_dot(w.d, w.dmin, w.scales, w.qs, nullptr, a);
}

DESKSIDE_HD inline float block_dot(const BlockQ5_K& w, const BlockQ8_K& a) {
    return k4_block_dot(w.d, w.dmin, w.scales, w.qs, w.qh, a);
}

DESKSIDE_HD inline float block_dot(const BlockQ6_K& w, const BlockQ8_K& a) {
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
        const int half = g / 8, quarter = (g % 8) / 2, l0 = 16 * (g % 2);
        int group = 0, asum = 0;
        for (int i = 0; i < 4; ++i) {
            const uint32_t lw = load_u32(w.ql + 64 * half + 32 * (quarter & 1) + l0 + 4 * i);
            const uint32_t low = quarter < 2 ? lw & kLowNibbles : (lw >> 4) & kLowNibbles;
            const uint32_t high = (load_u32(w.qh + 32 * half + l0 + 4 * i) >> (2 * quarter)) & 0x03030303u;
            const uint32_t av = load_u32(a.qs + 16 * g + 4 * i);
            group = dp4a(low | (high << 4), av, group);  // levels 0..63 = value + 32
            asum += byte_sum(av);
        }
        isum += w.scales[g] * (group - 32 * asum);
    }
    return mul_rn(mul_rn(fp16_to_fp32(w.d), a.d), static_cast<float>(isum));
}

DESKSIDE_HD inline float block_dot(const BlockIq4Xs& w, const BlockQ8_K& a) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
        int group = 0;
        for (int i = 0; i < 4; ++i) {
            const uint32_t q = load_u32(w.qs + 16 * g + 4 * i);
            group = dp4a(iq4_levels4(q & kLowNibbles), load_u32(a.qs + 32 * g + 4 * i), group);
            group = dp4a(iq4_levels4((q >> 4) & kLowNibbles), load_u32(a.qs + 32 * g + 16 + 4 * i), group);
        }
        isum += iq4xs_scale(w, g) * group;
    }
    return mul_rn(mul_rn(fp16_to_fp32(w.d), a.d), static_cast<float>(isum));
}

// ---- float weights -----------------------------------------------------------------------------

// F32 / F16 / BF16 rows are dotted in chunks of kFloatChunk elements (the last may be shorter):
// one fma chain per chunk, then the chunks combined like quantized blocks. quant/'s reference
// accumulates in double instead, so these agree with it within float rounding only.
inline constexpr int kFloatChunk = 32;

DESKSIDE_HD inline float chunk_dot(const float* w, const float* a, int n) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc = fma_rn(w[j], a[j], acc);
    return acc;
}

// F16 (bf16 = false) or BF16 (bf16 = true) weights and activations.
DESKSIDE_HD inline float chunk_dot(const uint16_t* w, const uint16_t* a, int n, bool bf16) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) {
        const float wf = bf16 ? bf16_to_fp32(w[j]) : fp16_to_fp32(w[j]);
        const float af = bf16 ? bf16_to_fp32(a[j]) : fp16_to_fp32(a[j]);
        acc = fma_rn(wf, af, acc);
    }
    return acc;
}

// ---- the order in which the kernels combine block contributions -----------------------------

// Lane l of a warp sums, from 0.0f, the contributions of blocks l, l + 32, l + 64, ... in
// ascending order; the 32 partial sums are then combined by the butterfly the kernels run with
// __shfl_xor_sync (offsets 16, 8, 4, 2, 1, each lane adding its partner's value to its own).
// The partition depends on the number of blocks alone, so every output element of a matmul is
// reduced in the same order whatever the batch size. This is the host model of that tree:
// `partials` (kWarpLanes values) is overwritten.
DESKSIDE_HD inline float combine_lanes(float* partials) {
    for (int offset = kWarpLanes / 2; offset > 0; offset /= 2) {
        float next[kWarpLanes];
        for (int l = 0; l < kWarpLanes; ++l) next[l] = add_rn(partials[l], partials[l ^ offset]);
        for (int l = 0; l < kWarpLanes; ++l) partials[l] = next[l];
    }
    return partials[0];
}

// ---- traits: a weight type's block, activation block and element count ----------------------

template <quant::TypeId T>
struct WeightTraits;

template <class W, class A, quant::TypeId ActType, int Elems>
struct QuantizedTraits {
    using Block = W;
    using ActBlock = A;
    static constexpr quant::TypeId kActType = ActType;
    static constexpr int kElems = Elems;  // elements per block
    static constexpr int kActElems = ActType == quant::TypeId::Q8_K ? kQKK : kQK;  // per activation block
    static constexpr bool kFloat = false;
};

template <class E, quant::TypeId ActType>
struct FloatTraits {
    using Element = E;
    static constexpr quant::TypeId kActType = ActType;
    static constexpr int kElems = kFloatChunk;  // elements per chunk
    static constexpr int kActElems = 1;         // activations are converted element by element
    static constexpr bool kFloat = true;
};

using quant::TypeId;
// clang-format off
template <> struct WeightTraits<TypeId::F32>    : FloatTraits<float, TypeId::F32> {};
template <> struct WeightTraits<TypeId::F16>    : FloatTraits<uint16_t, TypeId::F16> {};
template <> struct WeightTraits<TypeId::BF16>   : FloatTraits<uint16_t, TypeId::BF16> {};
template <> struct WeightTraits<TypeId::Q4_0>   : QuantizedTraits<BlockQ4_0,  BlockQ8_0, TypeId::Q8_0, kQK> {};
template <> struct WeightTraits<TypeId::Q4_1>   : QuantizedTraits<BlockQ4_1,  BlockQ8_1, TypeId::Q8_1, kQK> {};
template <> struct WeightTraits<TypeId::Q5_0>   : QuantizedTraits<BlockQ5_0,  BlockQ8_0, TypeId::Q8_0, kQK> {};
template <> struct WeightTraits<TypeId::Q5_1>   : QuantizedTraits<BlockQ5_1,  BlockQ8_1, TypeId::Q8_1, kQK> {};
template <> struct WeightTraits<TypeId::Q8_0>   : QuantizedTraits<BlockQ8_0,  BlockQ8_0, TypeId::Q8_0, kQK> {};
template <> struct WeightTraits<TypeId::IQ4_NL> : QuantizedTraits<BlockIq4Nl, BlockQ8_0, TypeId::Q8_0, kQK> {};
template <> struct WeightTraits<TypeId::Q2_K>   : QuantizedTraits<BlockQ2_K,  BlockQ8_K, TypeId::Q8_K, kQKK> {};
template <> struct WeightTraits<TypeId::Q3_K>   : QuantizedTraits<BlockQ3_K,  BlockQ8_K, TypeId::Q8_K, kQKK> {};
template <> struct WeightTraits<TypeId::Q4_K>   : QuantizedTraits<BlockQ4_K,  BlockQ8_K, TypeId::Q8_K, kQKK> {};
template <> struct WeightTraits<TypeId::Q5_K>   : QuantizedTraits<BlockQ5_K,  BlockQ8_K, TypeId::Q8_K, kQKK> {};
template <> struct WeightTraits<TypeId::Q6_K>   : QuantizedTraits<BlockQ6_K,  BlockQ8_K, TypeId::Q8_K, kQKK> {};
template <> struct WeightTraits<TypeId::IQ4_XS> : QuantizedTraits<BlockIq4Xs, BlockQ8_K, TypeId::Q8_K, kQKK> {};
// clang-format on

// Calls f(WeightTraits<T>{}) for the weight type `type` and returns true, or returns false for
// a type the CUDA kernels do not handle. Host side: the launchers' one switch over types.
template <class F>
bool visit_weight_type(quant::TypeId type, F&& f) {
    switch (type) {
        case TypeId::F32: f(WeightTraits<TypeId::F32>{}); return true;
        case TypeId::F16: f(WeightTraits<TypeId::F16>{}); return true;
        case TypeId::BF16: f(WeightTraits<TypeId::BF16>{}); return true;
        case TypeId::Q4_0: f(WeightTraits<TypeId::Q4_0>{}); return true;
        case TypeId::Q4_1: f(WeightTraits<TypeId::Q4_1>{}); return true;
        case TypeId::Q5_0: f(WeightTraits<TypeId::Q5_0>{}); return true;
        case TypeId::Q5_1: f(WeightTraits<TypeId::Q5_1>{}); return true;
        case TypeId::Q8_0: f(WeightTraits<TypeId::Q8_0>{}); return true;
        case TypeId::IQ4_NL: f(WeightTraits<TypeId::IQ4_NL>{}); return true;
        case TypeId::Q2_K: f(WeightTraits<TypeId::Q2_K>{}); return true;
        case TypeId::Q3_K: f(WeightTraits<TypeId::Q3_K>{}); return true;
        case TypeId::Q4_K: f(WeightTraits<TypeId::Q4_K>{}); return true;
        case TypeId::Q5_K: f(WeightTraits<TypeId::Q5_K>{}); return true;
        case TypeId::Q6_K: f(WeightTraits<TypeId::Q6_K>{}); return true;
        case TypeId::IQ4_XS: f(WeightTraits<TypeId::IQ4_XS>{}); return true;
        default: return false;
    }
}

}  // namespace deskside::backends::cuda::device
