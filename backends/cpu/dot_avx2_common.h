// Small AVX2 building blocks shared by the *_avx2.cpp dot kernels. Include only from files
// compiled with -mavx2 -mfma -mf16c (the build gives *_avx2.cpp and *_avx512.cpp those flags).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace deskside::backends::cpu::avx2 {

inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 16 bytes of nibble pairs -> 32 bytes: the 16 low nibbles, then the 16 high nibbles (the
// element order of the 32-element block formats).
inline __m256i nibbles_32(const uint8_t* qs) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, byte j = 0xFF where bit j is set.
inline __m256i bits_to_bytes(uint32_t bits) {
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
    const __m256i bit_of_byte = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_of_byte), bit_of_byte);
}

// Sum of u[i] * s[i] over each group of 4 bytes, u unsigned, s signed: 8 int32. The 16-bit
// pair sums saturate above 32767, so callers keep 2 * max(u) * max(|s|) below that.
inline __m256i dot_u8_i8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// As dot_u8_i8 for two signed vectors: |x| (read as unsigned, so -128 gives 128) times y with
// x's sign. y must avoid -128 (negating it overflows); the activation quantizers keep every
// level in [-127, 127], and 2 * 128 * 127 still fits the 16-bit pair sums.
inline __m256i dot_i8_i8(__m256i x, __m256i y) { return dot_u8_i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }

// 16-bit pair products of u (unsigned) and s (signed), weighted by one int16 scale for the
// first 16 elements and another for the last 16: 8 int32.
inline __m256i dot_u8_i8_two_scales(__m256i u, __m256i s, int scale_lo, int scale_hi) {
    const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(scale_hi)),
                                            _mm_set1_epi16(static_cast<int16_t>(scale_lo)));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales);
}

}  // namespace deskside::backends::cpu::avx2
