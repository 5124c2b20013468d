// AVX-512 (F, BW, VL) + VNNI dots for the most common weight types: Q8_0 and Q4_0 (two 32-element
// blocks per 512-bit vector) and Q4_K and Q6_K (64 elements of a super-block per vector).
// VPDPBUSD multiplies unsigned by signed bytes and adds groups of 4 straight into int32 lanes,
// so unlike the AVX2 path there is no 16-bit intermediate that could saturate.
// Other types use the AVX2 kernels on AVX-512 machines (see dot_kernels.cpp).
// ref: quant/ref_legacy.cpp, quant/ref_q4_q5_k.cpp, quant/ref_q6_q8_k.cpp
// GCC 12's AVX-512 intrinsics initialise their "undefined" operands from themselves, which its own
// -Wuninitialized then reports at every call (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backends/cpu/dot_isa.h"
#include "quant/blocks.h"

namespace deskside::backends::cpu {

using quant::kQK;
using quant::kQKK;

namespace {

inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1); }

// 16 bytes of nibble pairs -> 32 bytes: low nibbles, then high nibbles.
inline __m256i nibbles_32(const uint8_t* qs) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0F));
}

// Sums of x[i] * y[i] over groups of 4 signed bytes: |x| (unsigned, so -128 gives 128) times y
// with x's sign. y must avoid -128 (the activation quantizers keep levels in [-127, 127]).
inline __m512i dot_i8_i8(__m512i x, __m512i y) {
    const __mmask64 negative = _mm512_movepi8_mask(x);
    const __m512i y_signed = _mm512_mask_sub_epi8(y, negative, _mm512_setzero_si512(), y);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(x), y_signed);
}

// One 32-element block's scale in lanes 0-7 and the next block's in lanes 8-15.
inline __m512 two_block_scales(float a, float b) {
    return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(a), _mm512_set1_ps(b));
}

// Sum over blocks of d_w * d_a * integer dot, where levels(i) is block i's 32 signed levels.
template <typename WBlock, typename LevelsFn>
float dot_block_pairs(int64_t n, const WBlock* x, const quant::BlockQ8_0* y, LevelsFn levels) {
    const int64_t nb = n / kQK;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i sums = dot_i8_i8(join(levels(i), levels(i + 1)), join(load256(y[i].qs), load256(y[i + 1].qs)));
        const __m512 d = two_block_scales(fp16(x[i].d) * fp16(y[i].d), fp16(x[i + 1].d) * fp16(y[i + 1].d));
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc);
    }
    if (i < nb) {  // odd block count: the last block alone, upper half zero
        const __m512i sums = dot_i8_i8(join(levels(i), _mm256_setzero_si256()), join(load256(y[i].qs), _mm256_setzero_si256()));
        const __m512 d = two_block_scales(fp16(x[i].d) * fp16(y[i].d), 0.0f);
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

}  // namespace

float vec_dot_q8_0_avx512(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ8_0*>(w);
    return dot_block_pairs(n, x, static_cast<const quant::BlockQ8_0*>(a), [&](int64_t i) { return load256(x[i].qs); });
}

float vec_dot_q4_0_avx512(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ4_0*>(w);
    return dot_block_pairs(n, x, static_cast<const quant::BlockQ8_0*>(a), [&](int64_t i) {
        return _mm256_sub_epi8(nibbles_32(x[i].qs), _mm256_set1_epi8(8));
    });
}

float vec_dot_q4_k_avx512(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ4_K*>(w);
    const auto* y = static_cast<const quant::BlockQ8_K*>(a);
    __m512 acc = _mm512_setzero_ps();
    float mins = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t sc[8], m[8];
        int sum_mins = 0;
        for (int g = 0; g < 8; ++g) {
            quant::k4_scale_min(g, x[i].scales, &sc[g], &m[g]);
            sum_mins += m[g] * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
        }
        __m512i isum = _mm512_setzero_si512();
        for (int chunk = 0; chunk < 4; ++chunk) {
            // 64 elements: 32 low nibbles (group 2*chunk) then 32 high nibbles (group 2*chunk+1),
            // the same order as the 64 activation bytes.
            const __m256i q4 = load256(x[i].qs + 32 * chunk);
            const __m256i mask = _mm256_set1_epi8(0x0F);
            const __m512i u = join(_mm256_and_si256(q4, mask), _mm256_and_si256(_mm256_srli_epi16(q4, 4), mask));
            const __m512i q8 = _mm512_loadu_si512(y[i].qs + 64 * chunk);
            const __m512i dots = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, q8);
            const __m512i scales = _mm512_inserti64x4(_mm512_set1_epi32(sc[2 * chunk]), _mm256_set1_epi32(sc[2 * chunk + 1]), 1);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dots, scales));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(fp16(x[i].d) * y[i].d), _mm512_cvtepi32_ps(isum), acc);
        mins += fp16(x[i].dmin) * y[i].d * static_cast<float>(sum_mins);
    }
    return _mm512_reduce_add_ps(acc) - mins;
}

float vec_dot_q6_k_avx512(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ6_K*>(w);
    const auto* y = static_cast<const quant::BlockQ8_K*>(a);
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i two = _mm256_set1_epi8(0x03);
    const __m256i k32 = _mm256_set1_epi8(32);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const int8_t* sc = x[i].scales;
        __m512i isum = _mm512_setzero_si512();
        for (int half = 0; half < 2; ++half) {
            const __m256i l0 = load256(x[i].ql + 64 * half);
            const __m256i l1 = load256(x[i].ql + 64 * half + 32);
            const __m256i qh = load256(x[i].qh + 32 * half);
            auto high = [&](int shift) {  // bits shift..shift+1 of qh, moved to bits 4-5
                return _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(shift)), two), 4);
            };
            // Signed values (level - 32), as the AVX2 kernel takes them: every int32 lane then
            // holds its own elements' sum, at most 4 x (2 x 2) x 32 x 127 x 127 = 8258048 < 2^24,
            // so its conversion to float is exact. (Adding the whole -32 offset to one lane made
            // that lane ~1e8 for large same-signed activations and rounded it by several units.)
            const __m256i q0 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l0, nib), high(0)), k32);
            const __m256i q1 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l1, nib), high(2)), k32);
            const __m256i q2 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), nib), high(4)), k32);
            const __m256i q3 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), nib), high(6)), k32);
            const int8_t* q8 = y[i].qs + 128 * half;
            for (int pair = 0; pair < 2; ++pair) {
                // 64 elements = 4 groups of 16; dot lanes 4k..4k+3 belong to group g + k.
                const __m512i v = pair == 0 ? join(q0, q1) : join(q2, q3);
                const __m512i dots = dot_i8_i8(v, _mm512_loadu_si512(q8 + 64 * pair));
                const int g = 8 * half + 4 * pair;
                const __m512i scales = _mm512_cvtepi8_epi32(_mm_setr_epi8(
                    sc[g], sc[g], sc[g], sc[g], sc[g + 1], sc[g + 1], sc[g + 1], sc[g + 1], sc[g + 2], sc[g + 2], sc[g + 2],
                    sc[g + 2], sc[g + 3], sc[g + 3], sc[g + 3], sc[g + 3]));
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dots, scales));
            }
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(fp16(x[i].d) * y[i].d), _mm512_cvtepi32_ps(isum), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

}  // namespace deskside::backends::cpu
