// AVX2 tiled gemm for the K-quants against Q8_K: Q4_K and Q6_K (the two halves of Q4_K_M).
// Per super-block each weight row's scales and levels are decoded once and met by every
// activation row of the tile. Each output's integer super-block sum is exact (so the order of
// the integer adds is free), and its float steps are those of vec_dot_q4_k_avx2 /
// vec_dot_q6_k_avx2 in dot_kquant_avx2.cpp: one FMA of d_w * d_a into an 8-lane accumulator per
// super-block, Q4_K's mins in one scalar fma chain, the same horizontal sum at the end.
#include <cmath>

#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/dot_levels_avx2.h"
#include "backends/cpu/gemm_isa.h"
#include "backends/cpu/gemm_tiles.h"
#include "quant/blocks.h"

namespace deskside::backends::cpu {

using namespace avx2;
using quant::BlockQ8_K;
using quant::kQKK;

namespace {

inline __m256i scale_pair(int lo, int hi) {
    return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)), _mm_set1_epi16(static_cast<int16_t>(lo)));
}

inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

// The 16 group sums of a Q8_K block as int16 lanes.
inline __m256i bsums(const BlockQ8_K& b) { return load(b.bsums); }

struct Q4K {
    static constexpr int kRows = 4;
    static constexpr int kCols = 2;

    template <int R, int C>
    static void tile(int64_t k, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, float* y,
                     size_t y_stride) {
        const gemm::Rows<quant::BlockQ4_K, R> x(w, w_stride);
        const gemm::Rows<BlockQ8_K, C> act(a, a_stride);
        __m256 acc[R][C];
        float mins[R][C] = {};
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
        for (int64_t i = 0; i < k / kQKK; ++i) {
            uint8_t sc[R][8], m[R][8];
            for (int r = 0; r < R; ++r)
                for (int g = 0; g < 8; ++g) quant::k4_scale_min(g, x[r][i].scales, &sc[r][g], &m[r][g]);
            __m256i isum[R][C];
            for (int r = 0; r < R; ++r)
                for (int c = 0; c < C; ++c) isum[r][c] = _mm256_setzero_si256();
            for (int chunk = 0; chunk < 4; ++chunk) {
                __m256i lo[R], hi[R], s_lo[R], s_hi[R];
                for (int r = 0; r < R; ++r) {
                    q4_k_levels(x[r][i], chunk, &lo[r], &hi[r]);
                    s_lo[r] = _mm256_set1_epi16(sc[r][2 * chunk]);
                    s_hi[r] = _mm256_set1_epi16(sc[r][2 * chunk + 1]);
                }
                for (int c = 0; c < C; ++c) {
                    const __m256i a_lo = load(act[c][i].qs + 64 * chunk);
                    const __m256i a_hi = load(act[c][i].qs + 64 * chunk + 32);
                    for (int r = 0; r < R; ++r) {
                        // dot_u8_i8_two_scales with one scale for both halves, as in dot_k4.
                        isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(lo[r], a_lo), s_lo[r]));
                        isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(hi[r], a_hi), s_hi[r]));
                    }
                }
            }
            for (int r = 0; r < R; ++r) {
                const float d = fp16(x[r][i].d), dmin = fp16(x[r][i].dmin);
                uint64_t m8;
                __builtin_memcpy(&m8, m[r], 8);
                const __m256i mins32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(m8)));
                for (int c = 0; c < C; ++c) {
                    const BlockQ8_K& yb = act[c][i];
                    // sum over groups of min * (bsums[2g] + bsums[2g + 1]): exact in int32.
                    const __m256i pair_sums = _mm256_madd_epi16(bsums(yb), _mm256_set1_epi16(1));
                    const int sum_mins = hsum_epi32(_mm256_mullo_epi32(mins32, pair_sums));
                    acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(d * yb.d), _mm256_cvtepi32_ps(isum[r][c]), acc[r][c]);
                    mins[r][c] = std::fma(dmin * yb.d, static_cast<float>(sum_mins), mins[r][c]);
                }
            }
        }
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) y[c * y_stride + r] = hsum(acc[r][c]) - mins[r][c];
    }
};

struct Q6K {
    static constexpr int kRows = 4;
    static constexpr int kCols = 2;

    template <int R, int C>
    static void tile(int64_t k, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, float* y,
                     size_t y_stride) {
        const gemm::Rows<quant::BlockQ6_K, R> x(w, w_stride);
        const gemm::Rows<BlockQ8_K, C> act(a, a_stride);
        __m256 acc[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
        for (int64_t i = 0; i < k / kQKK; ++i) {
            __m256i isum[R][C];
            for (int r = 0; r < R; ++r)
                for (int c = 0; c < C; ++c) isum[r][c] = _mm256_setzero_si256();
            for (int h = 0; h < 2; ++h) {
                for (int q = 0; q < 4; ++q) {
                    const int g = 8 * h + 2 * q;
                    __m256i lv[R], s[R];
                    for (int r = 0; r < R; ++r) {
                        lv[r] = q6_k_levels(x[r][i], h, q);
                        s[r] = scale_pair(x[r][i].scales[g], x[r][i].scales[g + 1]);
                    }
                    for (int c = 0; c < C; ++c) {
                        const __m256i av = load(act[c][i].qs + 128 * h + 32 * q);
                        for (int r = 0; r < R; ++r)
                            isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(lv[r], av), s[r]));
                    }
                }
            }
            for (int r = 0; r < R; ++r) {
                const float d = fp16(x[r][i].d);
                const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r][i].scales)));
                for (int c = 0; c < C; ++c) {
                    const BlockQ8_K& yb = act[c][i];
                    // Levels are stored as value + 32: subtract 32 * sum of scale * group sum.
                    const int offset = hsum_epi32(_mm256_madd_epi16(scales16, bsums(yb)));
                    const __m256i exact = add_lane0(isum[r][c], -32 * offset);
                    acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(d * yb.d), _mm256_cvtepi32_ps(exact), acc[r][c]);
                }
            }
        }
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) y[c * y_stride + r] = hsum(acc[r][c]);
    }
};

}  // namespace

void gemm_q4_k_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    gemm::run<Q4K>(k, w, ws, nr, a, as, nc, y, ys);
}

void gemm_q6_k_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    gemm::run<Q6K>(k, w, ws, nr, a, as, nc, y, ys);
}

}  // namespace deskside::backends::cpu
