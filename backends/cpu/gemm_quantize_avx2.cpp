// AVX2 activation quantizers: the same bytes as quant/activation_quant.cpp (Q8_0 and Q8_1 with
// llama.cpp's x86 rounding: scale 127 / amax, levels rounded half to even) and as the reference
// Q8_K quantizer (quant/ref_q6_q8_k.cpp: scale -127 / max, nearest_int's magic-number rounding),
// computed 8 lanes at a time. Every float step is the scalar one (one IEEE multiply or add per
// element, a max that is exact), so the results are bit-identical; tests check it.
// ref: quant/activation_quant.cpp, quant/ref_q6_q8_k.cpp (from_float_q8_k)
#include <cstring>

#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/gemm_isa.h"
#include "quant/blocks.h"
#include "quant/float16.h"

namespace deskside::backends::cpu {

using namespace avx2;

namespace {

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

// 32 int32 (4 vectors, in element order) -> 32 int8 in element order; inputs are in [-128, 127].
inline void store_levels(const __m256i q[4], int8_t* out) {
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_packs_epi16(p01, p23);
    // The packs work per 128-bit lane: restore the order of the 4-byte groups.
    const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
}

// One 32-element block with the x86 rounding; returns amax / 127 and the sum of the levels.
inline float quantize_block_x86(const float* x, int8_t* qs, int* level_sum) {
    __m256 v[4];
    __m256 amax_v = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
        v[j] = _mm256_loadu_ps(x + 8 * j);
        amax_v = _mm256_max_ps(amax_v, abs_ps(v[j]));
    }
    const float amax = hmax(amax_v);
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
    __m256i q[4];
    __m256i sum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
        const __m256 rounded = _mm256_round_ps(_mm256_mul_ps(v[j], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[j] = _mm256_cvtps_epi32(rounded);
        sum = _mm256_add_epi32(sum, q[j]);
    }
    store_levels(q, qs);
    *level_sum = hsum_epi32(sum);
    return amax / 127.f;
}

}  // namespace

void quantize_q8_0_avx2(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<quant::BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / quant::kQK; ++i) {
        int sum;
        y[i].d = quant::fp32_to_fp16(quantize_block_x86(x + i * quant::kQK, y[i].qs, &sum));
    }
}

void quantize_q8_1_avx2(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<quant::BlockQ8_1*>(dst);
    for (int64_t i = 0; i < n / quant::kQK; ++i) {
        int sum;
        const float d = quantize_block_x86(x + i * quant::kQK, y[i].qs, &sum);
        y[i].d = quant::fp32_to_fp16(d);
        y[i].s = quant::fp32_to_fp16(d * static_cast<float>(sum));
    }
}

void quantize_q8_k_avx2(const float* src, void* dst, int64_t n) {
    auto* blocks = static_cast<quant::BlockQ8_K*>(dst);
    constexpr int kVecs = quant::kQKK / 8;
    for (int64_t i = 0; i < n / quant::kQKK; ++i) {
        const float* x = src + i * quant::kQKK;
        quant::BlockQ8_K& y = blocks[i];
        __m256 amax_v = _mm256_setzero_ps();
        for (int j = 0; j < kVecs; ++j) amax_v = _mm256_max_ps(amax_v, abs_ps(_mm256_loadu_ps(x + 8 * j)));
        const float amax = hmax(amax_v);
        if (amax == 0.0f) {
            std::memset(&y, 0, sizeof(y));
            continue;
        }
        // The reference keeps the first element of largest magnitude, with its sign.
        const __m256 amax_b = _mm256_set1_ps(amax);
        float max = 0;
        for (int j = 0; j < kVecs; ++j) {
            const int hits = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + 8 * j)), amax_b, _CMP_EQ_OQ));
            if (hits != 0) {
                max = x[8 * j + __builtin_ctz(static_cast<unsigned>(hits))];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 scale = _mm256_set1_ps(iscale);
        // nearest_int of the rounded product: the reference adds 1.5 * 2^23 to it and reads the
        // integer off the mantissa, which is round-half-even of the float product. Rounded here
        // explicitly: written as a multiply and that add, GCC fused the two into one FMA
        // (-ffp-contract=fast), rounding the exact product instead, a level off wherever the
        // product rounds across a half; llama.cpp's quantize_row_q8_K_ref (ggml-base, built
        // without FMA) and its repacked Q8_K quantizer round the product first.
        for (int blk = 0; blk < quant::kQKK / 32; ++blk) {
            __m256i q[4];
            for (int j = 0; j < 4; ++j) {
                const __m256 product = _mm256_mul_ps(scale, _mm256_loadu_ps(x + 32 * blk + 8 * j));
                const __m256 level = _mm256_round_ps(product, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[j] = _mm256_min_epi32(_mm256_cvtps_epi32(level), _mm256_set1_epi32(127));
            }
            store_levels(q, y.qs + 32 * blk);
            y.bsums[2 * blk] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
            y.bsums[2 * blk + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
        }
        y.d = 1 / iscale;
    }
}

}  // namespace deskside::backends::cpu
