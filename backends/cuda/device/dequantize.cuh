// Block dequantization for every weight type quant/ computes with, callable from kernels and
// from the host test: each function writes the floats quant::to_float writes, bit for bit, using
// the same operations in the same order (quant/ref_*.cpp). Also the field accessors the block
// dots share (packed K-quant scales, the IQ4 codebook).
// ref: the layouts are quant/blocks.h's (ggml/src/ggml-common.h).
#pragma once

#include "backends/cuda/device/hd.cuh"
#include "quant/blocks.h"

namespace deskside::backends::cuda::device {

using quant::BlockIq4Nl;
using quant::BlockIq4Xs;
using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ4_0;
using quant::BlockQ4_1;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;
using quant::kQK;
using quant::kQKK;

// ---- fields -------------------------------------------------------------------------------

// The IQ4_NL / IQ4_XS levels, copied at compile time from quant::kIq4nlValues into constant
// memory (device code cannot read a host array); the host reads quant's array itself.
struct Iq4Codebook {
    int8_t v[16];
};
constexpr Iq4Codebook make_iq4_codebook() {
    Iq4Codebook c{};
    for (int i = 0; i < 16; ++i) c.v[i] = quant::kIq4nlValues[i];
    return c;
}
DESKSIDE_CONSTANT constexpr Iq4Codebook kIq4Codebook = make_iq4_codebook();

DESKSIDE_HD inline int iq4_level(int nibble) {
#if defined(__CUDA_ARCH__)
    return kIq4Codebook.v[nibble];
#else
    return quant::kIq4nlValues[nibble];
#endif
}

// Four IQ4 levels as packed int8, from the four nibbles in bits 0-3, 8-11, 16-19, 24-27.
DESKSIDE_HD inline uint32_t iq4_levels4(uint32_t nibbles) {
    uint32_t out = 0;
    for (int i = 0; i < 4; ++i) {
        const auto level = static_cast<uint8_t>(iq4_level((nibbles >> (8 * i)) & 0xF));
        out |= static_cast<uint32_t>(level) << (8 * i);
    }
    return out;
}

// quant::k4_scale_min: the 6-bit scale and min of group j (0..7) of a Q4_K / Q5_K block, from its
// 12 packed bytes (a pointer, or anything indexed like one).
template <class Bytes>
DESKSIDE_HD inline void k4_scale_min(int j, const Bytes& packed, int* scale, int* min) {
    if (j < 4) {
        *scale = packed[j] & 63;
        *min = packed[j + 4] & 63;
    } else {
        *scale = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
        *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    }
}

// quant::q3k_scale: the signed 6-bit scale of group j (0..15) of a Q3_K block (packed as above).
template <class Bytes>
DESKSIDE_HD inline int q3k_scale(int j, const Bytes& packed) {
    const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// IQ4_XS group scale (-32..31) of group g (0..7).
DESKSIDE_HD inline int iq4xs_scale(const BlockIq4Xs& b, int g) {
    const int low = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0xF;
    const int high = (b.scales_h >> (2 * g)) & 3;
    return (low | (high << 4)) - 32;
}

// Nibble j (0..31) of a 16-byte run: low nibbles are elements 0-15, high nibbles 16-31.
DESKSIDE_HD inline int nibble32(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

// Bit 4 of element j of a Q5_0 / Q5_1 block.
DESKSIDE_HD inline int fifth_bit(const uint8_t* qh, int j) { return static_cast<int>((load_u32(qh) >> j) & 1) << 4; }

// Q2_K / Q3_K 2-bit field of element e (0..255).
DESKSIDE_HD inline int two_bits(const uint8_t* qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

// Q4_K / Q5_K nibble of element e (0..255): 64 elements per 32 bytes, low nibbles first.
DESKSIDE_HD inline int k4_nibble(const uint8_t* qs, int e) {
    const uint8_t byte = qs[32 * (e / 64) + e % 32];
    return (e % 64) < 32 ? byte & 0xF : byte >> 4;
}

// Q6_K signed value (-32..31) of element e.
DESKSIDE_HD inline int q6k_value(const BlockQ6_K& b, int e) {
    const uint8_t* ql = b.ql + 64 * (e / 128);
    const uint8_t* qh = b.qh + 32 * (e / 128);
    const int quarter = (e % 128) / 32;
    const int l = e % 32;
    const uint8_t low_byte = ql[l + 32 * (quarter & 1)];
    const int low = quarter < 2 ? low_byte & 0xF : low_byte >> 4;
    return (low | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
}

// ---- dequantization: one block into kQK or kQKK floats ---------------------------------------

DESKSIDE_HD inline void dequantize(const BlockQ4_0& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) out[j] = mul_rn(static_cast<float>(nibble32(b.qs, j) - 8), d);
}

DESKSIDE_HD inline void dequantize(const BlockQ4_1& b, float* out) {
    const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
    for (int j = 0; j < kQK; ++j) out[j] = add_rn(mul_rn(static_cast<float>(nibble32(b.qs, j)), d), m);
}

DESKSIDE_HD inline void dequantize(const BlockQ5_0& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) out[j] = mul_rn(static_cast<float>((nibble32(b.qs, j) | fifth_bit(b.qh, j)) - 16), d);
}

DESKSIDE_HD inline void dequantize(const BlockQ5_1& b, float* out) {
    const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
    for (int j = 0; j < kQK; ++j) {
        out[j] = add_rn(mul_rn(static_cast<float>(nibble32(b.qs, j) | fifth_bit(b.qh, j)), d), m);
    }
}

DESKSIDE_HD inline void dequantize(const BlockQ8_0& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) out[j] = mul_rn(static_cast<float>(b.qs[j]), d);
}

DESKSIDE_HD inline void dequantize(const BlockIq4Nl& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) out[j] = mul_rn(d, static_cast<float>(iq4_level(nibble32(b.qs, j))));
}

DESKSIDE_HD inline void dequantize(const BlockQ2_K& b, float* out) {
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int e = 0; e < kQKK; ++e) {
        const uint8_t sc = b.scales[e / 16];
        const float dl = mul_rn(d, static_cast<float>(sc & 0xF));
        const float ml = mul_rn(dmin, static_cast<float>(sc >> 4));
        out[e] = sub_rn(mul_rn(dl, static_cast<float>(two_bits(b.qs, e))), ml);
    }
}

DESKSIDE_HD inline void dequantize(const BlockQ3_K& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    for (int e = 0; e < kQKK; ++e) {
        const int v = two_bits(b.qs, e) - (((b.hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4);
        out[e] = mul_rn(mul_rn(d, static_cast<float>(q3k_scale(e / 16, b.scales))), static_cast<float>(v));
    }
}

DESKSIDE_HD inline void dequantize(const BlockQ4_K& b, float* out) {
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int g = 0; g < 8; ++g) {
        int sc, m;
        k4_scale_min(g, b.scales, &sc, &m);
        const float dl = mul_rn(d, static_cast<float>(sc)), ml = mul_rn(dmin, static_cast<float>(m));
        for (int e = 32 * g; e < 32 * g + 32; ++e) {
            out[e] = sub_rn(mul_rn(dl, static_cast<float>(k4_nibble(b.qs, e))), ml);
        }
    }
}

DESKSIDE_HD inline void dequantize(const BlockQ5_K& b, float* out) {
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int g = 0; g < 8; ++g) {
        int sc, m;
        k4_scale_min(g, b.scales, &sc, &m);
        const float dl = mul_rn(d, static_cast<float>(sc)), ml = mul_rn(dmin, static_cast<float>(m));
        for (int e = 32 * g; e < 32 * g + 32; ++e) {
            const int q = k4_nibble(b.qs, e) | (((b.qh[e % 32] >> (e / 32)) & 1) << 4);
            out[e] = sub_rn(mul_rn(dl, static_cast<float>(q)), ml);
        }
    }
}

DESKSIDE_HD inline void dequantize(const BlockQ6_K& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    for (int e = 0; e < kQKK; ++e) {
        out[e] = mul_rn(mul_rn(d, static_cast<float>(b.scales[e / 16])), static_cast<float>(q6k_value(b, e)));
    }
}

DESKSIDE_HD inline void dequantize(const BlockIq4Xs& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    for (int g = 0; g < 8; ++g) {
        const float dl = mul_rn(d, static_cast<float>(iq4xs_scale(b, g)));
        for (int j = 0; j < 32; ++j) {
            out[32 * g + j] = mul_rn(dl, static_cast<float>(iq4_level(nibble32(b.qs + 16 * g, j))));
        }
    }
}

}  // namespace deskside::backends::cuda::device
