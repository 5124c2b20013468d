// The on-disk block layouts of every quantized GGUF type deskside computes with.
//
// Each struct is the exact byte image of one block as llama.cpp writes it (little-endian, no
// padding), so a tensor's data can be reinterpreted in place from the mmap. Scales stored as
// IEEE half floats are kept as raw uint16_t bits (see quant/float16.h); the static_asserts pin
// every size to the geometry table in quant/types.cpp so the two cannot drift apart.
// ref: ggml/src/ggml-common.h (block_q4_0 ... block_iq4_xs)
#pragma once

#include <array>
#include <cstdint>

namespace deskside::quant {

// Elements per block of the "legacy" formats (Q4_0 ... Q8_1, IQ4_NL).
inline constexpr int kQK = 32;
// Elements per super-block of the K-quants, Q8_K and IQ4_XS.
inline constexpr int kQKK = 256;
// Bytes of the packed 6-bit scales and mins of Q4_K and Q5_K.
inline constexpr int kK4Scales = 12;

// d * (q - 8), q in [0, 15]. Element j is in the low nibble of qs[j], element j+16 in the high.
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[kQK / 2];
};

// d * q + m, q in [0, 15]; nibble order as in Q4_0.
struct BlockQ4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[kQK / 2];
};

// d * (q - 16), q in [0, 31]: low 4 bits as in Q4_0, bit 4 of element j is bit j of qh.
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

// d * q + m, q in [0, 31]; bits as in Q5_0.
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

// d * q, q in [-127, 127].
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQK];
};

// Activation format dotted against Q4_1/Q5_1: s = d * sum(qs) lets the dot add the weights'
// offset m without touching the elements.
struct BlockQ8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[kQK];
};

// 16 groups of 16: element = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q in [0, 3].
// qs packs 4 elements per byte: within each 128-element half, byte l holds elements l, l+32,
// l+64, l+96 in bits 0-1, 2-3, 4-5, 6-7.
struct BlockQ2_K {
    uint8_t scales[kQKK / 16];
    uint8_t qs[kQKK / 4];
    uint16_t d;
    uint16_t dmin;
};

// 16 groups of 16: element = d * (scale[g] - 32) * (q - 4 * !high_bit), q in [0, 3], with
// 6-bit scales packed into 12 bytes and the third bit of each element in hmask.
struct BlockQ3_K {
    uint8_t hmask[kQKK / 8];
    uint8_t qs[kQKK / 4];
    uint8_t scales[12];
    uint16_t d;
};

// 8 groups of 32: element = d * sc[g] * q - dmin * m[g], q in [0, 15], with 6-bit sc/m packed
// into 12 bytes. qs holds 64 elements per 32 bytes: low nibbles first 32, high nibbles next 32.
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kK4Scales];
    uint8_t qs[kQKK / 2];
};

// As Q4_K with a fifth bit per element in qh (bit 2*i / 2*i+1 for the i-th 64-element chunk).
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kK4Scales];
    uint8_t qh[kQKK / 8];
    uint8_t qs[kQKK / 2];
};

// 16 groups of 16: element = d * scales[g] * (q - 32), q in [0, 63]: low 4 bits in ql, high 2
// bits in qh.
struct BlockQ6_K {
    uint8_t ql[kQKK / 2];
    uint8_t qh[kQKK / 4];
    int8_t scales[kQKK / 16];
    uint16_t d;
};

// Activation format for the K-quants: float scale, and the sums of each group of 16 so the dot
// can apply the weights' mins without touching the elements.
struct BlockQ8_K {
    float d;
    int8_t qs[kQKK];
    int16_t bsums[kQKK / 16];
};

// d * kIq4nlValues[q]; nibble order as in Q4_0.
struct BlockIq4Nl {
    uint16_t d;
    uint8_t qs[kQK / 2];
};

// 8 groups of 32: element = d * (ls[g] - 32) * kIq4nlValues[q] with 6-bit ls: low 4 bits in
// scales_l (two per byte), high 2 bits in scales_h.
struct BlockIq4Xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[kQKK / 64];
    uint8_t qs[kQKK / 2];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockIq4Xs) == 136);

// The 16 non-uniform levels of IQ4_NL / IQ4_XS.
// ref: ggml/src/ggml-common.h kvalues_iq4nl
inline constexpr std::array<int8_t, 16> kIq4nlValues{-127, -104, -83, -65, -49, -35, -22, -10,
                                                     1,    13,   25,  38,  53,  69,  89,  113};

// The 6-bit scale and min of group j (0..7) of a Q4_K / Q5_K super-block. Groups 0-3 sit in the
// low 6 bits of bytes 0-3 (scales) and 4-7 (mins); groups 4-7 keep their low 4 bits in bytes
// 8-11 and their top 2 bits in the spare top bits of bytes 0-7.
inline void k4_scale_min(int j, const uint8_t* packed, uint8_t* scale, uint8_t* min) {
    if (j < 4) {
        *scale = packed[j] & 63;
        *min = packed[j + 4] & 63;
    } else {
        *scale = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
        *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    }
}

// The signed 6-bit scale (-32..31) of group j (0..15) of a Q3_K super-block: low 4 bits in bytes
// 0-7 (groups 0-7 low nibbles, 8-15 high nibbles), top 2 bits in bytes 8-11.
inline int q3k_scale(int j, const uint8_t* packed) {
    const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

}  // namespace deskside::quant
