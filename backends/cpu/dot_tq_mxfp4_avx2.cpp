// AVX2 dots for the ternary formats TQ1_0 and TQ2_0 against Q8_K, and MXFP4 against Q8_0.
//
// TQ1_0 / TQ2_0: each super-block is decoded into eight vectors of 32 signed levels (-1, 0, 1),
// one per 32 consecutive elements, dotted with the activations' bytes in int32 lanes (lane j =
// elements 4j .. 4j + 3 of each 32-element unit, over all eight units); one FMA per super-block applies d_w * d_a. MXFP4: one 32-element block
// is one vector of levels looked up from kMxfp4Values, dotted and scaled like IQ4_NL (and tiled
// by the same gemm, gemm_legacy_avx2.cpp). backends/vulkan/shaders/matmul_q8k.comp and
// matmul_q8.comp follow these lanes to give the same bits.
// ref: quant/ref_ternary_mxfp4.cpp (the scalar references these must match)
#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/dot_isa.h"
#include "backends/cpu/dot_levels_avx2.h"
#include "quant/blocks.h"

namespace deskside::backends::cpu {

using namespace avx2;
using quant::BlockQ8_K;
using quant::kQKK;

namespace {

// Trit n of every byte of v (a TQ1_0 byte b holds trit n as ((uint8_t)(b * 3^n) * 3) >> 8),
// with the 3^n given per 16-bit lane (the same for both bytes of a lane): 0..2 per byte.
__m256i trits(__m256i v, __m256i pow3) {
    // The low byte of v * 3^n is (low byte * 3^n) mod 256; moved up, as the high byte of
    // (high byte << 8) * 3^n already is.
    const __m256i lo = _mm256_slli_epi16(_mm256_mullo_epi16(v, pow3), 8);
    const __m256i hi = _mm256_mullo_epi16(_mm256_and_si256(v, _mm256_set1_epi16(static_cast<short>(0xFF00))), pow3);
    // (p << 8) * 3 >> 16 = (p * 3) >> 8.
    const __m256i three = _mm256_set1_epi16(3);
    return _mm256_or_si256(_mm256_mulhi_epu16(lo, three), _mm256_slli_epi16(_mm256_mulhi_epu16(hi, three), 8));
}

// The int32 lane sums of stored digits t (level t - 1) times activations a. A TQ2_0 field may
// also hold 3, level 2 (llama.cpp and gguf-py decode it so; no quantizer writes it), so the
// levels are not only signs.
__m256i ternary_dot(__m256i t, __m256i a) { return dot_i8_i8(_mm256_sub_epi8(t, _mm256_set1_epi8(1)), a); }

// Sum over super-blocks of d_w * d_a * (integer lane sums), `block_sums(i)` giving block i's.
template <typename WBlock, typename SumsFn>
float dot_ternary(int64_t n, const WBlock* x, const BlockQ8_K* y, SumsFn block_sums) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const __m256 d = _mm256_set1_ps(fp16(x[i].d) * y[i].d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(block_sums(i)), acc);
    }
    return hsum(acc);
}

}  // namespace

float vec_dot_tq1_0_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockTq1_0*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    return dot_ternary(n, x, y, [&](int64_t i) {
        const quant::BlockTq1_0& b = x[i];
        const int8_t* act = y[i].qs;
        // Elements 0..159: five trits of each of qs[0..31].
        const __m256i q5 = load(b.qs);
        __m256i sums = _mm256_setzero_si256();
        short pow3 = 1;
        for (int t = 0; t < 5; ++t, pow3 = static_cast<short>(3 * pow3))
            sums = _mm256_add_epi32(sums, ternary_dot(trits(q5, _mm256_set1_epi16(pow3)), load(act + 32 * t)));
        // Elements 160..223: trits 0, 1 (then 2, 3) of qs[32..47], one per 128-bit lane.
        const __m128i q16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 32));
        const __m256i both = _mm256_set_m128i(q16, q16);
        sums = _mm256_add_epi32(sums, ternary_dot(trits(both, _mm256_set_m128i(_mm_set1_epi16(3), _mm_set1_epi16(1))),
                                                  load(act + 160)));
        sums = _mm256_add_epi32(sums, ternary_dot(trits(both, _mm256_set_m128i(_mm_set1_epi16(27), _mm_set1_epi16(9))),
                                                  load(act + 192)));
        // Elements 224..255: trit 4 of qs[32..47], then trit t of qh[m] at 240 + 4 t + m.
        uint32_t qh;
        __builtin_memcpy(&qh, b.qh, 4);
        const __m256i last = _mm256_set_m128i(_mm_set1_epi32(static_cast<int>(qh)), q16);
        const __m256i pow_last = _mm256_set_m128i(_mm_setr_epi16(1, 1, 3, 3, 9, 9, 27, 27), _mm_set1_epi16(81));
        return _mm256_add_epi32(sums, ternary_dot(trits(last, pow_last), load(act + 224)));
    });
}

float vec_dot_tq2_0_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockTq2_0*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    return dot_ternary(n, x, y, [&](int64_t i) {
        __m256i sums = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {
            const __m256i q2 = load(x[i].qs + 32 * half);
            for (int k = 0; k < 4; ++k)
                sums = _mm256_add_epi32(sums,
                                        ternary_dot(byte_field(q2, 2 * k, 3), load(y[i].qs + 128 * half + 32 * k)));
        }
        return sums;
    });
}

float vec_dot_mxfp4_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockMxfp4*>(w);
    const auto* y = static_cast<const quant::BlockQ8_0*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / quant::kQK; ++i) {
        const __m256i sums = dot_i8_i8(levels(x[i]), load(y[i].qs));
        const __m256 d = _mm256_set1_ps(block_scale(x[i]) * fp16(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc);
    }
    return hsum(acc);
}

}  // namespace deskside::backends::cpu
