// AVX2 + FMA + F16C versions of the attention inner loops (ops_attention_kernels.h); each
// returns the same bits as the portable version, which tests/backends/test_cpu_ops.cpp checks.
// 16-lane vectors of the reference machine are emulated as pairs of 8-lane ones: the lane-wise
// arithmetic is identical, and the cross-lane reduction is written out in its order.
#include <immintrin.h>

#include "backends/cpu/ops_attention_kernels.h"

namespace deskside::backends::cpu {

namespace {

__m256 load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

__m256 round_f16(__m256 v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }

float f16_round_scalar(float v) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT))); }

}  // namespace

float attn_dot_f16_avx2(int64_t n, const uint16_t* k, const uint16_t* q) {
    const int64_t np = n / kAttnF16Step * kAttnF16Step;
    double sum = 0;
    if (np > 0) {
        __m256 lo[4], hi[4];  // lanes 0-7 and 8-15 of each 16-lane accumulator
        for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
        for (int64_t i = 0; i < np; i += kAttnF16Step) {
            for (int j = 0; j < 4; ++j) {
                const int64_t e = i + 16 * j;
                lo[j] = _mm256_fmadd_ps(load_f16(k + e), load_f16(q + e), lo[j]);
                hi[j] = _mm256_fmadd_ps(load_f16(k + e + 8), load_f16(q + e + 8), hi[j]);
            }
        }
        lo[0] = _mm256_add_ps(lo[0], lo[2]);
        hi[0] = _mm256_add_ps(hi[0], hi[2]);
        lo[1] = _mm256_add_ps(lo[1], lo[3]);
        hi[1] = _mm256_add_ps(hi[1], hi[3]);
        lo[0] = _mm256_add_ps(lo[0], lo[1]);
        hi[0] = _mm256_add_ps(hi[0], hi[1]);
        const __m256 h = _mm256_add_ps(hi[0], lo[0]);
        const __m128 g = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
        const __m128 s = _mm_add_ps(g, _mm_movehl_ps(g, g));  // (g0 + g2, g1 + g3)
        sum = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
    }
    for (int64_t i = np; i < n; ++i) {
        const float a = _cvtsh_ss(k[i]), b = _cvtsh_ss(q[i]);
        sum += static_cast<double>(a * b);
    }
    return static_cast<float>(sum);
}

void attn_scale_avx2(float* acc, int64_t n, float scale, bool f16) {
    const __m256 s = _mm256_set1_ps(scale);
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(acc + d), s);
        _mm256_storeu_ps(acc + d, f16 ? round_f16(v) : v);
    }
    for (; d < n; ++d) acc[d] = f16 ? f16_round_scalar(acc[d] * scale) : acc[d] * scale;
}

void attn_accumulate_avx2(float* acc, const float* v, float w, int64_t n, bool f16) {
    const __m256 vw = _mm256_set1_ps(w);
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        const __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(v + d), vw, _mm256_loadu_ps(acc + d));
        _mm256_storeu_ps(acc + d, f16 ? round_f16(r) : r);
    }
    for (; d < n; ++d) {
        const float r = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(v[d]), _mm_set_ss(w), _mm_set_ss(acc[d])));
        acc[d] = f16 ? f16_round_scalar(r) : r;
    }
}

void attn_f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) {
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) _mm256_storeu_ps(dst + d, load_f16(src + d));
    for (; d < n; ++d) dst[d] = _cvtsh_ss(src[d]);
}

}  // namespace deskside::backends::cpu
