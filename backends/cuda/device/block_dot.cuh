// The integer part of a weight block's dot with an activation block, cut the way the CPU backend's
// AVX2 kernels cut it into 8 int32 lanes, for every quantized weight type; and the traits that tie
// a weight type to its block and activation types.
//
// Lane j (0..7) of the CPU's vec_dot holds the products of elements 4j .. 4j + 3 of every
// 32-element piece of a block (backends/cpu/dot_legacy_avx2.cpp, dot_kquant_avx2.cpp: one int32
// lane of _mm256_madd_epi16), times the piece half's scale for the K-quants. Each lane is an exact
// integer, so any order of integer additions gives it; what matters is which products land in which
// lane, because each lane then runs its own float chain (exact_dot.cuh). ExactDot<T> gives, per
// weight type T:
//   Lane lane(w, j)          lane j's weight levels (and scales), decoded once for every token;
//   int lane_sum(l, a, j)    the CPU's int32 lane j for that activation block;
//   int share(l, a, j)       lane j's part of one block-wide integer: the mins' sum (Q2_K, Q4_K,
//                            Q5_K: kShare == Share::Mins) or Q3_K's level-offset correction, which
//                            the CPU adds to lane 0 (Share::Lane0);
//   float scale(w, a)        d_w * d_a, the factor of every lane's fma;
//   float tail_step(w, a, shared, tail)   one step of the tail chain (kTail): Offsets (Q4_1, Q5_1,
//                            hsum + the chain of fma(m_w, s_a)), Mins (hsum - the chain of
//                            fma(dmin_w * d_a, float(mins' sum))), Scale (the low-bit i-quants:
//                            no chain, tail_step returns the power of two hsum is multiplied by),
//                            or None.
// Fields are read with 16-bit loads (every block is 2-aligned but MXFP4's, which block_dot_lowbit.cuh
// reads byte by byte; load_u32_a2) and Q8_1's and Q8_K's levels with 32-bit ones (activation rows
// are 16-aligned, their blocks multiples of 4 bytes), so the same code reads global memory on the
// device and host memory in the tests.
// ref: backends/cpu/dot_legacy_avx2.cpp, dot_kquant_avx2.cpp, dot_levels_avx2.h (the lanes);
//      backends/vulkan/shaders/weight_levels.glsl (the same lanes in GLSL)
#pragma once

#include "backends/cuda/device/quantize_activation.cuh"
#include "quant/types.h"

namespace deskside::backends::cuda::device {

using quant::TypeId;

inline constexpr int kCpuLanes = 8;  // int32 / float lanes of one AVX2 register
inline constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;

// ---- loads -----------------------------------------------------------------------------------

// 4 little-endian bytes at a 2-aligned address (two 16-bit loads on the device).
DESKSIDE_HD inline uint32_t load_u32_a2(const void* p) {
#if defined(__CUDA_ARCH__)
    const uint16_t* h = static_cast<const uint16_t*>(p);
    return static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16);
#else
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
#endif
}

// 4 little-endian bytes at a 4-aligned address.
DESKSIDE_HD inline uint32_t load_u32_a4(const void* p) {
#if defined(__CUDA_ARCH__)
    return *static_cast<const uint32_t*>(p);
#else
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
#endif
}

// 4 * kWords bytes from a 2-aligned address, read by index like the block's byte array.
template <int kWords>
struct PackedBytes {
    uint32_t w[kWords];
    DESKSIDE_HD int operator[](int i) const { return static_cast<int>((w[i / 4] >> (8 * (i % 4))) & 0xFF); }
};
template <int kWords>
DESKSIDE_HD inline PackedBytes<kWords> load_bytes_a2(const uint8_t* p) {
    PackedBytes<kWords> b;
    for (int i = 0; i < kWords; ++i) b.w[i] = load_u32_a2(p + 4 * i);
    return b;
}

// ---- level words ---------------------------------------------------------------------------------

// Bits 0-3 of x to bit 4 of bytes 0-3 (the fifth bit of four Q5 elements).
DESKSIDE_HD inline uint32_t spread_bits4(uint32_t x) {
    return ((x & 1u) << 4) | ((x & 2u) << 11) | ((x & 4u) << 18) | ((x & 8u) << 25);
}

// Elements 4j .. 4j + 3 of a 32-element nibble block (16 bytes: elements 0-15 in the low
// nibbles, 16-31 in the high ones), one per byte.
DESKSIDE_HD inline uint32_t nibble_word(const uint8_t* qs, int j) {
    return (load_u32_a2(qs + 4 * (j % 4)) >> (4 * (j / 4))) & kLowNibbles;
}

// The activation block's levels 4j .. 4j + 3 (Q8_0 blocks are 2-aligned, Q8_1's levels 4-aligned).
DESKSIDE_HD inline uint32_t act_word(const BlockQ8_0& a, int j) { return load_u32_a2(a.qs + 4 * j); }
DESKSIDE_HD inline uint32_t act_word(const BlockQ8_1& a, int j) { return load_u32_a4(a.qs + 4 * j); }
// Q8_K: levels 4j .. 4j + 3 of 32-element unit u.
DESKSIDE_HD inline uint32_t act_word(const BlockQ8_K& a, int u, int j) { return load_u32_a4(a.qs + 32 * u + 4 * j); }
// Q8_K's 16-element group sums 2j and 2j + 1.
DESKSIDE_HD inline void act_bsums(const BlockQ8_K& a, int j, int* lo, int* hi) {
    const uint32_t v = load_u32_a4(a.bsums + 2 * j);
    *lo = static_cast<int16_t>(v & 0xFFFF);
    *hi = static_cast<int16_t>(v >> 16);
}

enum class Tail { None, Offsets, Mins, Scale };
enum class Share { None, Lane0, Mins };

template <quant::TypeId T>
struct ExactDot;

// ---- 32-element blocks (Q8_0 / Q8_1 activations) -------------------------------------------------

// Shared by the 32-element types: lane j is one dp4a of 4 levels with 4 activations, less
// `kOffset` times their sum for the types stored as level + offset.
template <class W, class A, quant::TypeId kAct, int kOffset, Tail kT>
struct ExactLegacy {
    using Block = W;
    using ActBlock = A;
    static constexpr quant::TypeId kActType = kAct;
    static constexpr Tail kTail = kT;
    static constexpr Share kShare = Share::None;
    struct Lane {
        uint32_t q;
    };
    DESKSIDE_HD static int lane_sum(const Lane& l, const A& a, int j) {
        const uint32_t x = act_word(a, j);
        return kOffset == 0 ? dp4a(l.q, x, 0) : dp4a(l.q, x, 0) - kOffset * byte_sum(x);
    }
    DESKSIDE_HD static int share(const Lane&, const A&, int) { return 0; }
    DESKSIDE_HD static float scale(const W& w, const A& a) { return mul_rn(fp16_to_fp32(w.d), fp16_to_fp32(a.d)); }
    // Q4_1 / Q5_1: offsets = fma(m_w, s_a, offsets), a chain of its own.
    DESKSIDE_HD static float tail_step(const W& w, const A& a, int, float tail) {
        if constexpr (kT == Tail::Offsets) return fma_rn(fp16_to_fp32(w.m), fp16_to_fp32(a.s), tail);
        else return tail;
    }
};

template <>
struct ExactDot<TypeId::Q4_0> : ExactLegacy<BlockQ4_0, BlockQ8_0, TypeId::Q8_0, 8, Tail::None> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) { return {nibble_word(w.qs, j)}; }
};

template <>
struct ExactDot<TypeId::Q4_1> : ExactLegacy<BlockQ4_1, BlockQ8_1, TypeId::Q8_1, 0, Tail::Offsets> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) { return {nibble_word(w.qs, j)}; }
};

// Q5: element e's fifth bit is bit e of qh.
template <>
struct ExactDot<TypeId::Q5_0> : ExactLegacy<BlockQ5_0, BlockQ8_0, TypeId::Q8_0, 16, Tail::None> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) {
        return {nibble_word(w.qs, j) | spread_bits4((load_u32_a2(w.qh) >> (4 * j)) & 0xF)};
    }
};

template <>
struct ExactDot<TypeId::Q5_1> : ExactLegacy<BlockQ5_1, BlockQ8_1, TypeId::Q8_1, 0, Tail::Offsets> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) {
        return {nibble_word(w.qs, j) | spread_bits4((load_u32_a2(w.qh) >> (4 * j)) & 0xF)};
    }
};

template <>
struct ExactDot<TypeId::Q8_0> : ExactLegacy<BlockQ8_0, BlockQ8_0, TypeId::Q8_0, 0, Tail::None> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) { return {load_u32_a2(w.qs + 4 * j)}; }
};

template <>
struct ExactDot<TypeId::IQ4_NL> : ExactLegacy<BlockIq4Nl, BlockQ8_0, TypeId::Q8_0, 0, Tail::None> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) { return {iq4_levels4(nibble_word(w.qs, j))}; }
};

// ---- 256-element super-blocks (Q8_K activations) -------------------------------------------------

// Lane j of a super-block: for each 32-element unit u, its 4 levels and the scale of the unit half
// they lie in; `sh` the weight factors of lane j's share (groups 2j, 2j + 1 of 16 elements).
struct KLane {
    uint32_t q[8];
    int sc[8];
    int sh[2];
};

template <class W, Tail kT, Share kS, int kOffset>
struct ExactK {
    using Block = W;
    using ActBlock = BlockQ8_K;
    using Lane = KLane;
    static constexpr quant::TypeId kActType = TypeId::Q8_K;
    static constexpr Tail kTail = kT;
    static constexpr Share kShare = kS;
    DESKSIDE_HD static int lane_sum(const Lane& l, const BlockQ8_K& a, int j) {
        int sum = 0;
        for (int u = 0; u < 8; ++u) {
            const uint32_t x = act_word(a, u, j);
            const int dot = kOffset == 0 ? dp4a(l.q[u], x, 0) : dp4a(l.q[u], x, 0) - kOffset * byte_sum(x);
            sum += l.sc[u] * dot;
        }
        return sum;
    }
    DESKSIDE_HD static int share(const Lane& l, const BlockQ8_K& a, int j) {
        if constexpr (kS == Share::None) {
            return 0;
        } else {
            int lo, hi;
            act_bsums(a, j, &lo, &hi);
            return l.sh[0] * lo + l.sh[1] * hi;
        }
    }
    DESKSIDE_HD static float scale(const W& w, const BlockQ8_K& a) { return mul_rn(fp16_to_fp32(w.d), a.d); }
    DESKSIDE_HD static float tail_step(const W&, const BlockQ8_K&, int, float tail) { return tail; }
};

// Q2_K: unit u's levels are bits 2 (u % 4) of qs[32 (u / 4) + e]; group g = 2u + half has scale
// scales[g] & 15 and min scales[g] >> 4.
template <>
struct ExactDot<TypeId::Q2_K> : ExactK<BlockQ2_K, Tail::Mins, Share::Mins, 0> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) {
        const PackedBytes<4> sc = load_bytes_a2<4>(w.scales);
        Lane l;
        for (int u = 0; u < 8; ++u) {
            l.q[u] = (load_u32_a2(w.qs + 32 * (u / 4) + 4 * j) >> (2 * (u % 4))) & 0x03030303u;
            l.sc[u] = sc[2 * u + j / 4] & 0xF;
        }
        l.sh[0] = sc[2 * j] >> 4;
        l.sh[1] = sc[2 * j + 1] >> 4;
        return l;
    }
    // mins = fma(d_a * dmin, float(mins' sum), mins).
    DESKSIDE_HD static float tail_step(const Block& w, const BlockQ8_K& a, int mins_sum, float tail) {
        return fma_rn(mul_rn(a.d, fp16_to_fp32(w.dmin)), static_cast<float>(mins_sum), tail);
    }
};

// Q3_K: levels stored as value + 4 (bit u of hmask[e] the third bit); the CPU adds the correction
// -4 * sum_g scale_g * bsums_g to lane 0.
template <>
struct ExactDot<TypeId::Q3_K> : ExactK<BlockQ3_K, Tail::None, Share::Lane0, 0> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) {
        const PackedBytes<3> sc = load_bytes_a2<3>(w.scales);
        const uint32_t high = load_u32_a2(w.hmask + 4 * j);
        Lane l;
        for (int u = 0; u < 8; ++u) {
            const uint32_t low = (load_u32_a2(w.qs + 32 * (u / 4) + 4 * j) >> (2 * (u % 4))) & 0x03030303u;
            l.q[u] = low | (((high >> u) & 0x01010101u) << 2);
            l.sc[u] = q3k_scale(2 * u + j / 4, sc);
        }
        l.sh[0] = -4 * q3k_scale(2 * j, sc);
        l.sh[1] = -4 * q3k_scale(2 * j + 1, sc);
        return l;
    }
};

// Q4_K / Q5_K: unit u = group u (32 elements, one scale and min), nibbles of qs[32 (u / 2) + e]
// (low for even u), Q5_K's fifth bit is bit u of qh[e].
template <class W, bool kFifthBit>
struct ExactK4 : ExactK<W, Tail::Mins, Share::Mins, 0> {
    DESKSIDE_HD static KLane lane(const W& w, int j) {
        const PackedBytes<3> packed = load_bytes_a2<3>(w.scales);
        KLane l;
        int m = 0;
        for (int u = 0; u < 8; ++u) {
            l.q[u] = (load_u32_a2(w.qs + 32 * (u / 2) + 4 * j) >> (4 * (u % 2))) & kLowNibbles;
            if constexpr (kFifthBit) l.q[u] |= ((load_u32_a2(w.qh + 4 * j) >> u) & 0x01010101u) << 4;
            int mu;
            k4_scale_min(u, packed, &l.sc[u], &mu);
            if (u == j) m = mu;
        }
        l.sh[0] = m;  // lane j's share: group j, both its 16-element sums
        l.sh[1] = m;
        return l;
    }
    // mins = fma(dmin * d_a, float(mins' sum), mins) (the CPU's explicit std::fma).
    DESKSIDE_HD static float tail_step(const W& w, const BlockQ8_K& a, int mins_sum, float tail) {
        return fma_rn(mul_rn(fp16_to_fp32(w.dmin), a.d), static_cast<float>(mins_sum), tail);
    }
};

template <>
struct ExactDot<TypeId::Q4_K> : ExactK4<BlockQ4_K, false> {};
template <>
struct ExactDot<TypeId::Q5_K> : ExactK4<BlockQ5_K, true> {};

// Q6_K: unit u = quarter u % 4 of half u / 4; levels (value + 32) from ql's nibbles and qh's bit
// pairs; the CPU's lanes hold the signed values, so each lane subtracts its own 32 * sum.
template <>
struct ExactDot<TypeId::Q6_K> : ExactK<BlockQ6_K, Tail::None, Share::None, 32> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) {
        const PackedBytes<4> sc = load_bytes_a2<4>(reinterpret_cast<const uint8_t*>(w.scales));
        Lane l;
        for (int u = 0; u < 8; ++u) {
            const int half = u / 4, quarter = u % 4;
            const uint32_t lw = load_u32_a2(w.ql + 64 * half + 32 * (quarter & 1) + 4 * j);
            const uint32_t low = quarter < 2 ? lw & kLowNibbles : (lw >> 4) & kLowNibbles;
            const uint32_t high = (load_u32_a2(w.qh + 32 * half + 4 * j) >> (2 * quarter)) & 0x03030303u;
            l.q[u] = low | (high << 4);
            l.sc[u] = static_cast<int8_t>(sc[2 * u + j / 4]);
        }
        l.sh[0] = l.sh[1] = 0;
        return l;
    }
};

// IQ4_XS: unit u = group u, a nibble block of 16 bytes at qs + 16u, one 6-bit scale - 32.
template <>
struct ExactDot<TypeId::IQ4_XS> : ExactK<BlockIq4Xs, Tail::None, Share::None, 0> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) {
        const PackedBytes<1> low = load_bytes_a2<1>(w.scales_l);
        const int high = w.scales_h;
        Lane l;
        for (int u = 0; u < 8; ++u) {
            l.q[u] = iq4_levels4(nibble_word(w.qs + 16 * u, j));
            l.sc[u] = (((low[u / 2] >> (4 * (u % 2))) & 0xF) | (((high >> (2 * u)) & 3) << 4)) - 32;
        }
        l.sh[0] = l.sh[1] = 0;
        return l;
    }
};

}  // namespace deskside::backends::cuda::device

// The low-bit types: IQ1-IQ3 and TQ1_0 / TQ2_0 (on ExactK), MXFP4 (on ExactLegacy), their codebooks.
#include "backends/cuda/device/block_dot_lowbit.cuh"

namespace deskside::backends::cuda::device {

// ---- traits: a weight type's block, activation block and element count ----------------------

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
    static constexpr int kElems = 1;
    static constexpr int kActElems = 1;  // activations are converted element by element
    static constexpr bool kFloat = true;
};

template <quant::TypeId T>
struct WeightTraits : QuantizedTraits<typename ExactDot<T>::Block, typename ExactDot<T>::ActBlock,
                                      ExactDot<T>::kActType, ExactDot<T>::kActType == TypeId::Q8_K ? kQKK : kQK> {
    static constexpr quant::TypeId kType = T;
};
template <>
struct WeightTraits<TypeId::F32> : FloatTraits<float, TypeId::F32> {
    static constexpr quant::TypeId kType = TypeId::F32;
};
template <>
struct WeightTraits<TypeId::F16> : FloatTraits<uint16_t, TypeId::F16> {
    static constexpr quant::TypeId kType = TypeId::F16;
};
template <>
struct WeightTraits<TypeId::BF16> : FloatTraits<uint16_t, TypeId::BF16> {
    static constexpr quant::TypeId kType = TypeId::BF16;
};

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
        case TypeId::IQ2_XXS: f(WeightTraits<TypeId::IQ2_XXS>{}); return true;
        case TypeId::IQ2_XS: f(WeightTraits<TypeId::IQ2_XS>{}); return true;
        case TypeId::IQ2_S: f(WeightTraits<TypeId::IQ2_S>{}); return true;
        case TypeId::IQ3_XXS: f(WeightTraits<TypeId::IQ3_XXS>{}); return true;
        case TypeId::IQ3_S: f(WeightTraits<TypeId::IQ3_S>{}); return true;
        case TypeId::IQ1_S: f(WeightTraits<TypeId::IQ1_S>{}); return true;
        case TypeId::IQ1_M: f(WeightTraits<TypeId::IQ1_M>{}); return true;
        case TypeId::TQ1_0: f(WeightTraits<TypeId::TQ1_0>{}); return true;
        case TypeId::TQ2_0: f(WeightTraits<TypeId::TQ2_0>{}); return true;
        case TypeId::MXFP4: f(WeightTraits<TypeId::MXFP4>{}); return true;
        default: return false;
    }
}

}  // namespace deskside::backends::cuda::device
