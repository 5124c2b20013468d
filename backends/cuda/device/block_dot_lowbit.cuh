// The low-bit weight types in block_dot.cuh's terms (the CPU's 8 int32 lanes per block, ExactDot<T>):
// the low-bit i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M and the ternary TQ1_0,
// TQ2_0 against Q8_K, MXFP4 against Q8_0; and their dequantization (get_rows), which decodes the
// same fields. Included by block_dot.cuh after its bases (ExactLegacy, ExactK), never on its own.
//
// Lane j of every type holds elements 4j .. 4j + 3 of each 32-element unit, as the CPU's
// maddubs + madd leaves them (dot_iq_lowbit_avx2.cpp, dot_tq_mxfp4_avx2.cpp):
// - i-quants: lane j = sum over units u of scale(u, j / 4) * (4 signed levels . 4 activations),
//   acc_j = fma(d_w * d_a, float(lane j), acc_j) per block, and after the horizontal sum the
//   type's power of two (quant::kIqDotScale): Tail::Scale, the factor handed over by tail_step.
//   The CPU puts the weights' signs on the activations (_mm256_sign_epi8) and multiplies
//   magnitudes; here the signs go on the levels. The products are the same because Q8_K levels lie
//   in -127..127 (its scale is -127 / max), where negation is exact.
// - TQ1_0 / TQ2_0: lane j = sum over units of (digit - 1) . activations, no scales; one fma per
//   block by fp16(d_w) * d_a, no tail.
// - MXFP4: as IQ4_NL with kMxfp4Values for levels and the halved E8M0 exponent for d_w. Its gemm
//   tile (gemm_legacy_avx2.cpp) is vec_dot's twin, and the CPU keeps none of these types
//   row-interleaved (backends/cpu/repack.h), so no chain rows.
// The codebooks (quant/iq_grids.h) are copied at compile time into a device table (global memory
// read through the read-only cache: threads of a warp look up different entries, which constant
// memory would serialize); the host reads an identical copy, which the tests compare with quant/.
// Field reads: every block here is 2-aligned in a row except MXFP4 (17 bytes, read byte by byte);
// IQ1_M has byte fields only but an even size, so its 16-bit scale words are 2-aligned too.
// ref: backends/cpu/dot_iq_lowbit_avx2.cpp, dot_tq_mxfp4_avx2.cpp; quant/iq_lowbit.h (iq_group, the
//      same fields), quant/ref_iq_lowbit.cpp, ref_ternary_mxfp4.cpp (to_float);
//      backends/vulkan/shaders/iq_lowbit.glsl (the same lanes in GLSL)
#pragma once

#include "quant/iq_grids.h"
#include "quant/iq_lowbit.h"

#if defined(__CUDACC__)
#define DESKSIDE_DEVICE_TABLE __device__
#else
#define DESKSIDE_DEVICE_TABLE
#endif

namespace deskside::backends::cuda::device {

using quant::BlockIq1M;
using quant::BlockIq1S;
using quant::BlockIq2S;
using quant::BlockIq2Xs;
using quant::BlockIq2Xxs;
using quant::BlockIq3S;
using quant::BlockIq3Xxs;
using quant::BlockMxfp4;
using quant::BlockTq1_0;
using quant::BlockTq2_0;

// ---- codebooks ------------------------------------------------------------------------------------

struct LowbitCodebooks {
    uint64_t iq2xxs[256], iq2xs[512], iq2s[1024], iq1s[2048];  // 8 magnitudes (IQ1: -1, 0, 1) each
    uint32_t iq3xxs[256], iq3s[512];                           // 4 magnitudes each
    uint8_t signs[128];                                        // quant::kIqSigns
    int8_t mxfp4[16];                                          // quant::kMxfp4Values
};

template <class Dst, class Src>
constexpr void copy_table(Dst& dst, const Src& src) {
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
}
constexpr LowbitCodebooks make_lowbit_codebooks() {
    LowbitCodebooks c{};
    copy_table(c.iq2xxs, quant::kIq2xxsGrid);
    copy_table(c.iq2xs, quant::kIq2xsGrid);
    copy_table(c.iq2s, quant::kIq2sGrid);
    copy_table(c.iq1s, quant::kIq1sGrid);
    copy_table(c.iq3xxs, quant::kIq3xxsGrid);
    copy_table(c.iq3s, quant::kIq3sGrid);
    copy_table(c.signs, quant::kIqSigns);
    copy_table(c.mxfp4, quant::kMxfp4Values);
    return c;
}
DESKSIDE_DEVICE_TABLE constexpr LowbitCodebooks kLowbitCodebooksDevice = make_lowbit_codebooks();
inline constexpr LowbitCodebooks kLowbitCodebooksHost = make_lowbit_codebooks();

DESKSIDE_HD inline const LowbitCodebooks& lowbit_codebooks() {
#if defined(__CUDA_ARCH__)
    return kLowbitCodebooksDevice;
#else
    return kLowbitCodebooksHost;
#endif
}

// ---- level words -----------------------------------------------------------------------------------

// 2 little-endian bytes at a 2-aligned address.
DESKSIDE_HD inline uint32_t load_u16_a2(const void* p) {
#if defined(__CUDA_ARCH__)
    return *static_cast<const uint16_t*>(p);
#else
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
#endif
}

// Elements 4h .. 4h + 3 of a 64-bit codebook entry (runs of 8; h = 0 or 1).
DESKSIDE_HD inline uint32_t entry_half(uint64_t entry, int h) { return static_cast<uint32_t>(entry >> (32 * h)); }

// Four magnitudes (bytes) negated where bits 0-3 of `signs` are set, as signed bytes.
DESKSIDE_HD inline uint32_t with_signs4(uint32_t mags, uint32_t signs) {
    uint32_t word = 0;
    for (int b = 0; b < 4; ++b) {
        const uint32_t m = (mags >> (8 * b)) & 0xFF;
        word |= ((((signs >> b) & 1) ? 0u - m : m) & 0xFF) << (8 * b);
    }
    return word;
}

// IQ1: four grid bytes (-1, 0, 1) as the levels 8 * grid + delta (delta -1 or +1).
DESKSIDE_HD inline uint32_t iq1_levels4(uint32_t grid, int delta) {
    uint32_t word = 0;
    for (int b = 0; b < 4; ++b) {
        const int level = 8 * static_cast<int8_t>(grid >> (8 * b)) + delta;
        word |= (static_cast<uint32_t>(level) & 0xFF) << (8 * b);
    }
    return word;
}

// Trit n (0..4) of a TQ1_0 byte (ref_ternary_mxfp4.cpp): the byte times 3^n modulo 256, times 3, >> 8.
DESKSIDE_HD inline uint32_t trit(uint32_t byte, int n) {
    uint32_t pow3 = 1;
    for (int i = 0; i < n; ++i) pow3 *= 3;
    return (((byte * pow3) & 0xFF) * 3) >> 8;
}

// ---- the i-quants: where each type keeps unit u's levels, scales and d ------------------------------
// levels4(b, u, j): elements 4j .. 4j + 3 of unit u as signed bytes; scale(b, u, h): the integer
// scale of half h; d(b): the fp16 block scale; kDotScale: the type's power of two.

struct Iq2XxsFormat {
    using Block = BlockIq2Xxs;
    static constexpr float kDotScale = quant::kIqDotScale<Block>;
    DESKSIDE_HD static float d(const Block& b) { return fp16_to_fp32(b.d); }
    // Unit u: 4 grid indices (bytes 0-3), then 4 sign indices of 7 bits and the scale (top 4 bits).
    DESKSIDE_HD static uint32_t meta(const Block& b, int u) {
        return load_u32_a2(reinterpret_cast<const uint8_t*>(b.qs) + 8 * u + 4);
    }
    DESKSIDE_HD static uint32_t levels4(const Block& b, int u, int j) {
        const LowbitCodebooks& cb = lowbit_codebooks();
        const int r = j / 2;
        const uint32_t index = reinterpret_cast<const uint8_t*>(b.qs)[8 * u + r];
        const uint32_t signs = cb.signs[(meta(b, u) >> (7 * r)) & 127];
        return with_signs4(entry_half(cb.iq2xxs[index], j % 2), signs >> (4 * (j % 2)));
    }
    DESKSIDE_HD static int scale(const Block& b, int u, int) { return 2 * static_cast<int>(meta(b, u) >> 28) + 1; }
};

struct Iq2XsFormat {
    using Block = BlockIq2Xs;
    static constexpr float kDotScale = quant::kIqDotScale<Block>;
    DESKSIDE_HD static float d(const Block& b) { return fp16_to_fp32(b.d); }
    // One uint16 per run of 8: grid index (9 bits) | sign index << 9.
    DESKSIDE_HD static uint32_t levels4(const Block& b, int u, int j) {
        const LowbitCodebooks& cb = lowbit_codebooks();
        const uint32_t q = b.qs[4 * u + j / 2];
        return with_signs4(entry_half(cb.iq2xs[q & 511], j % 2), cb.signs[q >> 9] >> (4 * (j % 2)));
    }
    DESKSIDE_HD static int scale(const Block& b, int u, int h) { return 2 * ((b.scales[u] >> (4 * h)) & 0xF) + 1; }
};

struct Iq2SFormat {
    using Block = BlockIq2S;
    static constexpr float kDotScale = quant::kIqDotScale<Block>;
    DESKSIDE_HD static float d(const Block& b) { return fp16_to_fp32(b.d); }
    // Run r: index qs[4u + r] | 2 bits of qh[u] << 8; its sign byte 32 bytes later.
    DESKSIDE_HD static uint32_t levels4(const Block& b, int u, int j) {
        const int r = j / 2;
        const uint32_t index = b.qs[4 * u + r] | ((b.qh[u] >> (2 * r)) & 3) << 8;
        const uint32_t signs = b.qs[kQKK / 8 + 4 * u + r];
        return with_signs4(entry_half(lowbit_codebooks().iq2s[index], j % 2), signs >> (4 * (j % 2)));
    }
    DESKSIDE_HD static int scale(const Block& b, int u, int h) { return 2 * ((b.scales[u] >> (4 * h)) & 0xF) + 1; }
};

struct Iq3XxsFormat {
    using Block = BlockIq3Xxs;
    static constexpr float kDotScale = quant::kIqDotScale<Block>;
    DESKSIDE_HD static float d(const Block& b) { return fp16_to_fp32(b.d); }
    // After 64 bytes of grid indices (one per run of 4), per unit a word as IQ2_XXS's meta.
    DESKSIDE_HD static uint32_t meta(const Block& b, int u) { return load_u32_a2(b.qs + kQKK / 4 + 4 * u); }
    DESKSIDE_HD static uint32_t levels4(const Block& b, int u, int j) {
        const LowbitCodebooks& cb = lowbit_codebooks();
        const uint32_t signs = cb.signs[(meta(b, u) >> (7 * (j / 2))) & 127];
        return with_signs4(cb.iq3xxs[b.qs[8 * u + j]], signs >> (4 * (j % 2)));
    }
    DESKSIDE_HD static int scale(const Block& b, int u, int) { return 2 * static_cast<int>(meta(b, u) >> 28) + 1; }
};

struct Iq3SFormat {
    using Block = BlockIq3S;
    static constexpr float kDotScale = quant::kIqDotScale<Block>;
    DESKSIDE_HD static float d(const Block& b) { return fp16_to_fp32(b.d); }
    // Run of 4 j: index qs[8u + j] | bit j of qh[u] << 8; one sign bit per element.
    DESKSIDE_HD static uint32_t levels4(const Block& b, int u, int j) {
        const uint32_t index = b.qs[8 * u + j] | ((b.qh[u] >> j) & 1) << 8;
        return with_signs4(lowbit_codebooks().iq3s[index], b.signs[4 * u + j / 2] >> (4 * (j % 2)));
    }
    DESKSIDE_HD static int scale(const Block& b, int u, int) {
        return 2 * ((b.scales[u / 2] >> (4 * (u % 2))) & 0xF) + 1;
    }
};

struct Iq1SFormat {
    using Block = BlockIq1S;
    static constexpr float kDotScale = quant::kIqDotScale<Block>;
    DESKSIDE_HD static float d(const Block& b) { return fp16_to_fp32(b.d); }
    // qh[u]: index bits 8-10 of run r at 3r, the scale at 12, the shift's sign at 15.
    DESKSIDE_HD static uint32_t levels4(const Block& b, int u, int j) {
        const uint32_t qh = b.qh[u];
        const int r = j / 2;
        const uint32_t index = b.qs[4 * u + r] | ((qh >> (3 * r)) & 7) << 8;
        return iq1_levels4(entry_half(lowbit_codebooks().iq1s[index], j % 2), qh & 0x8000 ? -1 : 1);
    }
    DESKSIDE_HD static int scale(const Block& b, int u, int) { return 2 * static_cast<int>((b.qh[u] >> 12) & 7) + 1; }
};

struct Iq1MFormat {
    using Block = BlockIq1M;
    static constexpr float kDotScale = quant::kIqDotScale<Block>;
    // quant::iq1m_d_bits: the fp16 d from the top nibbles of the four scale words.
    DESKSIDE_HD static float d(const Block& b) {
        uint32_t bits = 0;
        for (int i = 0; i < 4; ++i) bits |= (load_u16_a2(b.scales + 2 * i) >> 12) << (4 * i);
        return fp16_to_fp32(static_cast<uint16_t>(bits));
    }
    // Per run of 8 a nibble of qh: index bits 8-10, then the shift's sign.
    DESKSIDE_HD static uint32_t levels4(const Block& b, int u, int j) {
        const int r = j / 2;
        const uint32_t qh = b.qh[2 * u + r / 2] >> (4 * (r % 2));
        const uint32_t index = b.qs[4 * u + r] | (qh & 7) << 8;
        return iq1_levels4(entry_half(lowbit_codebooks().iq1s[index], j % 2), qh & 8 ? -1 : 1);
    }
    // Word u / 2 holds 3-bit scales of units 2 (u / 2) and 2 (u / 2) + 1, per half, from bit 0.
    DESKSIDE_HD static int scale(const Block& b, int u, int h) {
        return 2 * static_cast<int>((load_u16_a2(b.scales + 2 * (u / 2)) >> (6 * (u % 2) + 3 * h)) & 7) + 1;
    }
};

template <class F>
struct ExactIq : ExactK<typename F::Block, Tail::Scale, Share::None, 0> {
    using Block = typename F::Block;
    DESKSIDE_HD static KLane lane(const Block& w, int j) {
        KLane l;
        for (int u = 0; u < 8; ++u) {
            l.q[u] = F::levels4(w, u, j);
            l.sc[u] = F::scale(w, u, j / 4);
        }
        l.sh[0] = l.sh[1] = 0;
        return l;
    }
    DESKSIDE_HD static float scale(const Block& w, const BlockQ8_K& a) { return mul_rn(F::d(w), a.d); }
    // Not a chain: the factor finish_dot multiplies the lanes' sum by.
    DESKSIDE_HD static float tail_step(const Block&, const BlockQ8_K&, int, float) { return F::kDotScale; }
};

template <>
struct ExactDot<TypeId::IQ2_XXS> : ExactIq<Iq2XxsFormat> {};
template <>
struct ExactDot<TypeId::IQ2_XS> : ExactIq<Iq2XsFormat> {};
template <>
struct ExactDot<TypeId::IQ2_S> : ExactIq<Iq2SFormat> {};
template <>
struct ExactDot<TypeId::IQ3_XXS> : ExactIq<Iq3XxsFormat> {};
template <>
struct ExactDot<TypeId::IQ3_S> : ExactIq<Iq3SFormat> {};
template <>
struct ExactDot<TypeId::IQ1_S> : ExactIq<Iq1SFormat> {};
template <>
struct ExactDot<TypeId::IQ1_M> : ExactIq<Iq1MFormat> {};

// ---- ternary: digits 0..2 (TQ2_0 may hold 3), level = digit - 1 ------------------------------------

struct Tq1Format {
    using Block = BlockTq1_0;
    // Elements 32n + m (n < 5): trit n of qs[m]; 160 + 16n + m: trit n of qs[32 + m];
    // 240 + 4n + m: trit n of qh[m]. Unit u, lane j as bytes and trit.
    DESKSIDE_HD static uint32_t digits4(const Block& b, int u, int j) {
        const uint8_t* bytes = b.qs + 4 * j;
        int n = u;
        if (u >= 5 && (u < 7 || j < 4)) {
            bytes = b.qs + 32 + 4 * (j % 4);
            n = 2 * (u - 5) + j / 4;
        } else if (u == 7) {
            bytes = b.qh;
            n = j - 4;
        }
        uint32_t word = 0;
        for (int i = 0; i < 4; ++i) word |= trit(bytes[i], n) << (8 * i);
        return word;
    }
};

struct Tq2Format {
    using Block = BlockTq2_0;
    // Within each half of 128 elements, byte m holds elements m, m + 32, m + 64, m + 96.
    DESKSIDE_HD static uint32_t digits4(const Block& b, int u, int j) {
        return (load_u32_a2(b.qs + 32 * (u / 4) + 4 * j) >> (2 * (u % 4))) & 0x03030303u;
    }
};

template <class F>
struct ExactTernary : ExactK<typename F::Block, Tail::None, Share::None, 1> {
    DESKSIDE_HD static KLane lane(const typename F::Block& w, int j) {
        KLane l;
        for (int u = 0; u < 8; ++u) {
            l.q[u] = F::digits4(w, u, j);
            l.sc[u] = 1;
        }
        l.sh[0] = l.sh[1] = 0;
        return l;
    }
};

template <>
struct ExactDot<TypeId::TQ1_0> : ExactTernary<Tq1Format> {};
template <>
struct ExactDot<TypeId::TQ2_0> : ExactTernary<Tq2Format> {};

// ---- MXFP4 ------------------------------------------------------------------------------------------

// quant::e8m0_to_fp32_half: 2^(e - 128), e = 0 and 1 as subnormals.
DESKSIDE_HD inline float e8m0_to_fp32_half(uint32_t e) {
    return bits_to_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

// Levels 4j .. 4j + 3 (qs may sit at an odd address: byte loads).
DESKSIDE_HD inline uint32_t mxfp4_levels4(const BlockMxfp4& b, int j) {
    const uint32_t nibbles = (load_u32(b.qs + 4 * (j % 4)) >> (4 * (j / 4))) & kLowNibbles;
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) {
        word |= static_cast<uint32_t>(static_cast<uint8_t>(lowbit_codebooks().mxfp4[(nibbles >> (8 * i)) & 0xF]))
                << (8 * i);
    }
    return word;
}

template <>
struct ExactDot<TypeId::MXFP4> : ExactLegacy<BlockMxfp4, BlockQ8_0, TypeId::Q8_0, 0, Tail::None> {
    DESKSIDE_HD static Lane lane(const Block& w, int j) { return {mxfp4_levels4(w, j)}; }
    DESKSIDE_HD static float scale(const Block& w, const BlockQ8_0& a) {
        return mul_rn(e8m0_to_fp32_half(w.e), fp16_to_fp32(a.d));
    }
};

// ---- dequantization (get_rows): quant::to_float's bits -------------------------------------------

// element = ((d * scale) * kDotScale) * level, as ref_iq_lowbit.cpp.
template <class F>
DESKSIDE_HD inline void dequantize_iq(const typename F::Block& b, float* out) {
    const float d = F::d(b);
    for (int u = 0; u < 8; ++u) {
        for (int h = 0; h < 2; ++h) {
            const float dl = mul_rn(mul_rn(d, static_cast<float>(F::scale(b, u, h))), F::kDotScale);
            for (int j = 4 * h; j < 4 * h + 4; ++j) {
                const uint32_t levels = F::levels4(b, u, j);
                for (int i = 0; i < 4; ++i)
                    out[32 * u + 4 * j + i] = mul_rn(dl, static_cast<float>(static_cast<int8_t>(levels >> (8 * i))));
            }
        }
    }
}

// element = d * (digit - 1).
template <class F>
DESKSIDE_HD inline void dequantize_ternary(const typename F::Block& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    for (int u = 0; u < 8; ++u) {
        for (int j = 0; j < 8; ++j) {
            const uint32_t digits = F::digits4(b, u, j);
            for (int i = 0; i < 4; ++i) {
                const int level = static_cast<int>((digits >> (8 * i)) & 0xFF) - 1;
                out[32 * u + 4 * j + i] = mul_rn(d, static_cast<float>(level));
            }
        }
    }
}

DESKSIDE_HD inline void dequantize(const BlockIq2Xxs& b, float* out) { dequantize_iq<Iq2XxsFormat>(b, out); }
DESKSIDE_HD inline void dequantize(const BlockIq2Xs& b, float* out) { dequantize_iq<Iq2XsFormat>(b, out); }
DESKSIDE_HD inline void dequantize(const BlockIq2S& b, float* out) { dequantize_iq<Iq2SFormat>(b, out); }
DESKSIDE_HD inline void dequantize(const BlockIq3Xxs& b, float* out) { dequantize_iq<Iq3XxsFormat>(b, out); }
DESKSIDE_HD inline void dequantize(const BlockIq3S& b, float* out) { dequantize_iq<Iq3SFormat>(b, out); }
DESKSIDE_HD inline void dequantize(const BlockIq1S& b, float* out) { dequantize_iq<Iq1SFormat>(b, out); }
DESKSIDE_HD inline void dequantize(const BlockIq1M& b, float* out) { dequantize_iq<Iq1MFormat>(b, out); }
DESKSIDE_HD inline void dequantize(const BlockTq1_0& b, float* out) { dequantize_ternary<Tq1Format>(b, out); }
DESKSIDE_HD inline void dequantize(const BlockTq2_0& b, float* out) { dequantize_ternary<Tq2Format>(b, out); }

// element = d * level, d the halved E8M0 scale.
DESKSIDE_HD inline void dequantize(const BlockMxfp4& b, float* out) {
    const float d = e8m0_to_fp32_half(b.e);
    for (int j = 0; j < 8; ++j) {
        const uint32_t levels = mxfp4_levels4(b, j);
        for (int i = 0; i < 4; ++i)
            out[4 * j + i] = mul_rn(d, static_cast<float>(static_cast<int8_t>(levels >> (8 * i))));
    }
}

}  // namespace deskside::backends::cuda::device
