// The on-disk block layouts of every quantized GGUF type deskside computes with.
//
// Each struct is the exact byte image of one block as llama.cpp writes it (little-endian, no
// padding), so a tensor's data can be reinterpreted in place from the mmap. Scales stored as
// IEEE half floats are kept as raw uint16_t bits (see quant/float16.h); the static_asserts pin
// every size to the geometry table in quant/types.cpp so the two cannot drift apart.
// ref: ggml/src/ggml-common.h (block_q4_0 ... block_iq4_xs, block_tq1_0, block_tq2_0, block_mxfp4)
#pragma once

#include <array>
#include <bit>
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

// Ternary, 1.6875 bits per element: element = d * (t - 1), t in {0, 1, 2}. A byte holds five
// trits (four in qh) as the base-3 number t0 t1 t2 t3 t4 (t0 most significant) scaled to
// ceil(v * 256 / 243), so trit n of byte b is ((uint8_t)(b * 3^n) * 3) >> 8. Trit n of qs[m] is
// element 32 n + m for m < 32, 160 + 16 n + (m - 32) for m in [32, 48); trit n of qh[m] is
// element 240 + 4 n + m.
struct BlockTq1_0 {
    uint8_t qs[(kQKK - 4 * kQKK / 64) / 5];
    uint8_t qh[kQKK / 64];
    uint16_t d;
};

// Ternary, 2 bits per element: element = d * (q - 1), q in {0, 1, 2} (no quantizer writes 3; ggml
// reads it as 2); within each 128-element half, byte m holds elements m, m+32, m+64, m+96 in bits
// 0-1, 2-3, 4-5, 6-7.
struct BlockTq2_0 {
    uint8_t qs[kQKK / 4];
    uint16_t d;
};

// OCP microscaling FP4: element = 2^(e - 127) * E2M1(q), stored as e8m0_to_fp32_half(e) *
// kMxfp4Values[q] (the table doubled, the scale halved); nibble order as in Q4_0. The only
// block with an odd size: blocks after the first of a row start at odd addresses.
struct BlockMxfp4 {
    uint8_t e;
    uint8_t qs[kQK / 2];
};

// The low-bit i-quants: 256-element super-blocks whose elements come in runs of 8 (4 for IQ3)
// read from a fixed codebook (quant/iq_grids.h, one element per byte of an entry), with a sign
// per element and a 3-4 bit scale per 16 or 32 elements. IQ2_XXS, IQ2_XS and IQ3_XXS give each
// run of 8 a 7-bit sign index into kIqSigns (its eighth sign makes the count of minus signs even).
// ref: ggml/src/ggml-common.h (block_iq2_xxs ... block_iq1_m)

// 8 groups of 32, each 4 uint16 = two 32-bit words: word 0 holds the 4 grid indices (a byte
// each, kIq2xxsGrid) of its runs of 8, word 1 the 4 sign indices (7 bits each) and the scale in
// its top 4 bits: element = d * (0.5 + ls) * 0.25 * grid * sign.
struct BlockIq2Xxs {
    uint16_t d;
    uint16_t qs[kQKK / 8];
};

// One uint16 per run of 8: grid index (9 bits, kIq2xsGrid) | sign index << 9; a 4-bit scale per
// 16 elements (two per byte, low nibble first): element = d * (0.5 + ls) * 0.25 * grid * sign.
struct BlockIq2Xs {
    uint16_t d;
    uint16_t qs[kQKK / 8];
    uint8_t scales[kQKK / 32];
};

// qs: 32 bytes of grid index low bits (one per run of 8), then 32 bytes of signs (bit j of byte
// r = sign of element j of run r); qh: bits 9-10 of the indices (kIq2sGrid), 2 bits per run, 4
// runs per byte; scales as IQ2_XS.
struct BlockIq2S {
    uint16_t d;
    uint8_t qs[kQKK / 4];
    uint8_t qh[kQKK / 32];
    uint8_t scales[kQKK / 32];
};

// qs: 64 bytes of grid indices (kIq3xxsGrid, one per run of 4), then per group of 32 one 32-bit
// word: 4 sign indices (7 bits, one per run of 8) and the scale in the top 4 bits:
// element = d * (0.5 + ls) * 0.5 * grid * sign.
struct BlockIq3Xxs {
    uint16_t d;
    uint8_t qs[3 * kQKK / 8];
};

// qs: grid index low bits per run of 4, bit 8 (kIq3sGrid has 512 entries) in qh (bit r % 8 of
// byte r / 8); signs: one bit per element; a 4-bit scale per 32 elements (two per byte):
// element = d * (1 + 2 ls) * grid * sign.
struct BlockIq3S {
    uint16_t d;
    uint8_t qs[kQKK / 4];
    uint8_t qh[kQKK / 32];
    uint8_t signs[kQKK / 8];
    uint8_t scales[kQKK / 64];
};

// Per group of 32, one qh word: bits 3r..3r+2 = index bits 8-10 of run r (kIq1sGrid, values -1,
// 0, 1), bits 12-14 the scale, bit 15 the sign of the shift: element = d * (2 ls + 1) * (grid +-
// kIq1Delta).
struct BlockIq1S {
    uint16_t d;
    uint8_t qs[kQKK / 8];
    uint16_t qh[kQKK / 32];
};

// No field of its own for the fp16 super-block scale: its 16 bits are the top nibbles of the
// four uint16 words of `scales` (word 0 gives bits 0-3). The low 12 bits of each word are four
// 3-bit scales, one per 16 elements. qh holds, per run of 8, index bits 8-10 (kIq1sGrid) and the
// shift's sign in bit 3 (two runs per byte, low nibble first): element = d * (2 ls + 1) * (grid
// +- kIq1Delta).
struct BlockIq1M {
    uint8_t qs[kQKK / 8];
    uint8_t qh[kQKK / 16];
    uint8_t scales[kQKK / 32];
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
static_assert(sizeof(BlockIq2Xxs) == 66);
static_assert(sizeof(BlockIq2Xs) == 74);
static_assert(sizeof(BlockIq2S) == 82);
static_assert(sizeof(BlockIq3Xxs) == 98);
static_assert(sizeof(BlockIq3S) == 110);
static_assert(sizeof(BlockIq1S) == 50);
static_assert(sizeof(BlockIq1M) == 56);
static_assert(sizeof(BlockTq1_0) == 54);
static_assert(sizeof(BlockTq2_0) == 66);
static_assert(sizeof(BlockMxfp4) == 17);

// The 16 E2M1 values of MXFP4 (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives), doubled to
// integers as ggml stores them.
// ref: gguf-py 0.19.0 gguf/quants.py (MXFP4.kvalues); ggml/src/ggml-common.h kvalues_mxfp4
inline constexpr std::array<int8_t, 16> kMxfp4Values{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the E8M0 scale 2^(e - 127), the factor of the doubled kMxfp4Values: 2^(e - 128) as float
// bits, the two smallest (e = 0, 1) as subnormals. e = 255 (E8M0's NaN) gives 2^127, as ggml.
// ref: ggml/src/ggml-impl.h (ggml_e8m0_to_fp32_half); gguf-py MXFP4.e8m0_to_fp32_half
inline float e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    return std::bit_cast<float>(bits);
}

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
