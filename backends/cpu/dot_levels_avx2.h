// Weight-level decoders shared by the single-row dot kernels (dot_*_avx2.cpp) and the tiled gemm
// kernels (gemm_*_avx2.cpp). Both must turn a block into the same bytes so that their integer
// lane sums, and hence their float results, are identical (batch invariance). Include only from
// files compiled with -mavx2 -mfma -mf16c.
#pragma once

#include <cstdint>

#include "backends/cpu/dot_avx2_common.h"
#include "quant/blocks.h"

namespace deskside::backends::cpu::avx2 {

// ---- 32-element blocks: the 32 levels as signed bytes in [-127, 127] (Q8_0 may hold -128) ----

inline __m256i levels(const quant::BlockQ4_0& b) { return _mm256_sub_epi8(nibbles_32(b.qs), _mm256_set1_epi8(8)); }

inline __m256i levels(const quant::BlockQ5_0& b) {
    uint32_t qh;
    __builtin_memcpy(&qh, b.qh, 4);
    // (nibble | bit4 << 4) - 16 is nibble - 16 (= nibble | 0xF0 as int8) where bit 4 is clear.
    const __m256i minus16 = _mm256_andnot_si256(bits_to_bytes(qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    return _mm256_or_si256(nibbles_32(b.qs), minus16);
}

inline __m256i levels(const quant::BlockQ8_0& b) { return load(b.qs); }

inline __m256i levels(const quant::BlockIq4Nl& b) {
    const __m128i table128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4nlValues.data()));
    return _mm256_shuffle_epi8(_mm256_set_m128i(table128, table128), nibbles_32(b.qs));
}

inline __m256i levels(const quant::BlockMxfp4& b) {
    const __m128i table128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kMxfp4Values.data()));
    return _mm256_shuffle_epi8(_mm256_set_m128i(table128, table128), nibbles_32(b.qs));
}

// The float scale of a 32-element block's levels: its fp16 d, or MXFP4's halved E8M0 exponent.
template <class Block>
inline float block_scale(const Block& b) {
    return fp16(b.d);
}
inline float block_scale(const quant::BlockMxfp4& b) { return quant::e8m0_to_fp32_half(b.e); }

// ---- 256-element super-blocks ----

// Bits [shift, shift + width) of every byte of v, in the low bits of each byte.
inline __m256i byte_field(__m256i v, int shift, int mask) {
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(static_cast<char>(mask)));
}

// Adds an int scalar to lane 0 of an int32 vector (for offset terms folded into the exact sum).
inline __m256i add_lane0(__m256i v, int x) { return _mm256_add_epi32(v, _mm256_setr_epi32(x, 0, 0, 0, 0, 0, 0, 0)); }

// Q4_K chunk 0..3: the unsigned levels (0..15) of its low group (2 * chunk) and high group.
inline void q4_k_levels(const quant::BlockQ4_K& b, int chunk, __m256i* lo, __m256i* hi) {
    const __m256i q4 = load(b.qs + 32 * chunk);
    *lo = _mm256_and_si256(q4, _mm256_set1_epi8(0x0F));
    *hi = byte_field(q4, 4, 0x0F);
}

// Q6_K quarter k (0..3) of half h (0..1): the 32 unsigned levels (0..63, value + 32) that meet
// activations [128 h + 32 k, +32), groups 8 h + 2 k and 8 h + 2 k + 1.
inline __m256i q6_k_levels(const quant::BlockQ6_K& b, int h, int k) {
    const __m256i l = load(b.ql + 64 * h + 32 * (k & 1));
    const __m256i qh = load(b.qh + 32 * h);
    const __m256i low = k < 2 ? _mm256_and_si256(l, _mm256_set1_epi8(0x0F)) : byte_field(l, 4, 0x0F);
    return _mm256_or_si256(low, _mm256_slli_epi16(byte_field(qh, 2 * k, 3), 4));
}

}  // namespace deskside::backends::cpu::avx2
