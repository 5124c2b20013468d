// The low-bit i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) in one shape:
// each 32-element group of a super-block is 32 signed integer levels and an integer scale per
// 16-element half, and
//
//     element j of group g = d * scale[j / 16] * kDotScale * level[j]
//
// with d the block's fp16 scale and kDotScale a power of two per type. This is llama.cpp's
// formula rearranged without changing a single rounding: its d * (0.5 + s) * 0.25 * grid * sign
// equals d * (2 s + 1) * 0.125 * (grid * sign) exactly (the factors 2 and 0.125 are powers of two),
// and IQ1's d * (2 s + 1) * (grid +- 0.125) is d * (2 s + 1) * 0.125 * (8 grid +- 1). So the
// dequantizer is bit-identical to ggml's, and the dot
//
//     d_w * d_a * sum over groups and halves of scale[h] * sum(level[j] * q8[j]), times kDotScale
//
// computes exactly the integers (and, per block, the float) of ggml's generic vec_dot_*_q8_K.
// Both live in ref_iq_lowbit.cpp; the SIMD kernels decode the same fields with vector code.
// ref: ggml/src/ggml-quants.c (dequantize_row_iq2_xxs ... dequantize_row_iq1_m),
//      ggml/src/ggml-cpu/quants.c (ggml_vec_dot_iq2_xxs_q8_K_generic ... iq1_m)
#pragma once

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/iq_grids.h"

namespace deskside::quant {

// One 32-element group: levels and the scale of each 16-element half.
struct IqGroup {
    int8_t level[32];
    int scale[2];
};

// The power of two each type's integer dot is scaled by (see the top of the file).
template <typename Block>
inline constexpr float kIqDotScale = 0.125f;
template <>
inline constexpr float kIqDotScale<BlockIq3Xxs> = 0.25f;
template <>
inline constexpr float kIqDotScale<BlockIq3S> = 1.0f;

namespace iq_detail {

inline uint32_t u32_at(const void* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// Eight magnitudes of a 64-bit grid entry, each with the sign bit j of `signs`.
inline void signed_run(uint64_t entry, uint8_t signs, int8_t* out) {
    for (int j = 0; j < 8; ++j) {
        const int v = static_cast<int>((entry >> (8 * j)) & 0xFF);
        out[j] = static_cast<int8_t>(signs >> j & 1 ? -v : v);
    }
}

// Four magnitudes of a 32-bit grid entry, with sign bits `first` .. `first` + 3 of `signs`.
inline void signed_run4(uint32_t entry, uint8_t signs, int first, int8_t* out) {
    for (int j = 0; j < 4; ++j) {
        const int v = static_cast<int>((entry >> (8 * j)) & 0xFF);
        out[j] = static_cast<int8_t>(signs >> (first + j) & 1 ? -v : v);
    }
}

// IQ1: eight levels 8 * grid + delta (grid bytes are -1, 0, 1; delta is +-1).
inline void iq1_run(uint64_t entry, int delta, int8_t* out) {
    for (int j = 0; j < 8; ++j) out[j] = static_cast<int8_t>(8 * static_cast<int8_t>(entry >> (8 * j)) + delta);
}

}  // namespace iq_detail

// ---- the block scale d ----

template <typename Block>
inline float iq_d(const Block& b) {
    return fp16_to_fp32(b.d);
}

// IQ1_M's fp16 d is spread over the top nibbles of its four scale words (word 0 gives bits 0-3).
inline uint16_t iq1m_d_bits(const BlockIq1M& b) {
    uint16_t sc[4];
    std::memcpy(sc, b.scales, 8);
    return static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
}
template <>
inline float iq_d(const BlockIq1M& b) {
    return fp16_to_fp32(iq1m_d_bits(b));
}

// ---- group g (0..7) of a block ----

inline void iq_group(const BlockIq2Xxs& b, int g, IqGroup* out) {
    const uint32_t grids = b.qs[4 * g] | static_cast<uint32_t>(b.qs[4 * g + 1]) << 16;
    const uint32_t meta = b.qs[4 * g + 2] | static_cast<uint32_t>(b.qs[4 * g + 3]) << 16;
    for (int r = 0; r < 4; ++r) {
        const uint8_t signs = kIqSigns[(meta >> (7 * r)) & 127];
        iq_detail::signed_run(kIq2xxsGrid[(grids >> (8 * r)) & 0xFF], signs, out->level + 8 * r);
    }
    out->scale[0] = out->scale[1] = 2 * static_cast<int>(meta >> 28) + 1;
}

inline void iq_group(const BlockIq2Xs& b, int g, IqGroup* out) {
    for (int r = 0; r < 4; ++r) {
        const uint16_t q = b.qs[4 * g + r];
        iq_detail::signed_run(kIq2xsGrid[q & 511], kIqSigns[q >> 9], out->level + 8 * r);
    }
    out->scale[0] = 2 * (b.scales[g] & 0xF) + 1;
    out->scale[1] = 2 * (b.scales[g] >> 4) + 1;
}

inline void iq_group(const BlockIq2S& b, int g, IqGroup* out) {
    for (int r = 0; r < 4; ++r) {
        const int index = b.qs[4 * g + r] | ((b.qh[g] >> (2 * r)) & 3) << 8;
        iq_detail::signed_run(kIq2sGrid[index], b.qs[kQKK / 8 + 4 * g + r], out->level + 8 * r);
    }
    out->scale[0] = 2 * (b.scales[g] & 0xF) + 1;
    out->scale[1] = 2 * (b.scales[g] >> 4) + 1;
}

inline void iq_group(const BlockIq3Xxs& b, int g, IqGroup* out) {
    const uint32_t meta = iq_detail::u32_at(b.qs + kQKK / 4 + 4 * g);
    for (int r = 0; r < 4; ++r) {
        const uint8_t signs = kIqSigns[(meta >> (7 * r)) & 127];
        iq_detail::signed_run4(kIq3xxsGrid[b.qs[8 * g + 2 * r]], signs, 0, out->level + 8 * r);
        iq_detail::signed_run4(kIq3xxsGrid[b.qs[8 * g + 2 * r + 1]], signs, 4, out->level + 8 * r + 4);
    }
    out->scale[0] = out->scale[1] = 2 * static_cast<int>(meta >> 28) + 1;
}

inline void iq_group(const BlockIq3S& b, int g, IqGroup* out) {
    for (int k = 0; k < 8; ++k) {  // runs of 4
        const int index = b.qs[8 * g + k] | ((b.qh[g] >> k) & 1) << 8;
        iq_detail::signed_run4(kIq3sGrid[index], b.signs[4 * g + k / 2], 4 * (k % 2), out->level + 4 * k);
    }
    out->scale[0] = out->scale[1] = 2 * ((b.scales[g / 2] >> (4 * (g % 2))) & 0xF) + 1;
}

inline void iq_group(const BlockIq1S& b, int g, IqGroup* out) {
    const int qh = b.qh[g];
    const int delta = qh & 0x8000 ? -1 : 1;
    for (int r = 0; r < 4; ++r) {
        iq_detail::iq1_run(kIq1sGrid[b.qs[4 * g + r] | ((qh >> (3 * r)) & 7) << 8], delta, out->level + 8 * r);
    }
    out->scale[0] = out->scale[1] = 2 * ((qh >> 12) & 7) + 1;
}

inline void iq_group(const BlockIq1M& b, int g, IqGroup* out) {
    for (int r = 0; r < 4; ++r) {
        const int qh = b.qh[2 * g + r / 2] >> (4 * (r % 2));
        iq_detail::iq1_run(kIq1sGrid[b.qs[4 * g + r] | (qh & 7) << 8], qh & 8 ? -1 : 1, out->level + 8 * r);
    }
    uint16_t sc;
    std::memcpy(&sc, b.scales + 2 * (g / 2), 2);
    const int shift = 6 * (g % 2);
    out->scale[0] = 2 * ((sc >> shift) & 7) + 1;
    out->scale[1] = 2 * ((sc >> (shift + 3)) & 7) + 1;
}

}  // namespace deskside::quant
