// AVX2 tiled gemm for the K-quants against Q8_K: Q4_K and Q6_K (the two halves of Q4_K_M).
// Each weight row's super-block scales are unpacked once per call (per matmul task) into a small
// per-thread table, and its levels once per tile, then met by every activation row of the tile.
// Each output's integer super-block sum is exact (so the order of the integer adds is free), and
// its float steps are those of vec_dot_q4_k_avx2 / vec_dot_q6_k_avx2 in dot_kquant_avx2.cpp: the
// same int32 lanes, one FMA of d_w * d_a into an 8-lane accumulator per super-block, Q4_K's mins
// in one fma chain (one SIMD lane per weight row), the same horizontal sum at the end.
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

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

// The 16 group sums of a Q8_K block as int16 lanes.
inline __m256i bsums(const BlockQ8_K& b) { return load(b.bsums); }

// A Q4_K row's super-block fields that every tile re-reads, decoded once per gemm call (per
// task) instead of once per tile: the 6-bit scale/min unpacking was a third of the tile's work.
struct alignas(64) Q4KScales {
    float d, dmin;
    int16_t sc[8];     // group scales, 16-bit so a tile broadcasts them straight from memory
    int16_t mins[16];  // group g's min at lanes 2g and 2g + 1, to meet the 16 bsums in one madd
};

// The four int32 totals (one per lane) of four 8-lane vectors: exact, so any order is fine.
inline __m128i hsum4_epi32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

struct Q4K {
    using Block = quant::BlockQ4_K;
    using Scales = Q4KScales;
    static constexpr int kRows = 4;
    static constexpr int kCols = 2;
    static_assert(kRows <= 4, "the mins chains keep one weight row per lane of a 128-bit vector");

    static void decode(const Block& b, Scales* s) {
        s->d = fp16(b.d);
        s->dmin = fp16(b.dmin);
        for (int g = 0; g < 8; ++g) {
            uint8_t sc, m;
            quant::k4_scale_min(g, b.scales, &sc, &m);
            s->sc[g] = sc;
            s->mins[2 * g] = s->mins[2 * g + 1] = m;
        }
    }

    // s: R rows of k / 256 decoded scales each (row stride s_stride entries).
    template <int R, int C>
    static void tile(int64_t k, const uint8_t* w, size_t w_stride, const Scales* s, size_t s_stride,
                     const uint8_t* a, size_t a_stride, float* y, size_t y_stride) {
        const gemm::Rows<Block, R> x(w, w_stride);
        const gemm::Rows<BlockQ8_K, C> act(a, a_stride);
        __m256 acc[R][C];
        __m128 mins[C];  // lane r: row r's min chain, the scalar fma chain of dot_k4 per lane
        for (int c = 0; c < C; ++c) {
            mins[c] = _mm_setzero_ps();
            for (int r = 0; r < R; ++r) acc[r][c] = _mm256_setzero_ps();
        }
        for (int64_t i = 0; i < k / kQKK; ++i) {
            const Scales* sb[R];
            for (int r = 0; r < R; ++r) sb[r] = s + r * s_stride + i;
            __m256i isum[R][C];
            for (int r = 0; r < R; ++r)
                for (int c = 0; c < C; ++c) isum[r][c] = _mm256_setzero_si256();
            for (int chunk = 0; chunk < 4; ++chunk) {
                __m256i a_lo[C], a_hi[C];
                for (int c = 0; c < C; ++c) {
                    a_lo[c] = load(act[c][i].qs + 64 * chunk);
                    a_hi[c] = load(act[c][i].qs + 64 * chunk + 32);
                }
                for (int r = 0; r < R; ++r) {
                    __m256i lo, hi;
                    q4_k_levels(x[r][i], chunk, &lo, &hi);
                    const __m256i s_lo = _mm256_set1_epi16(sb[r]->sc[2 * chunk]);
                    const __m256i s_hi = _mm256_set1_epi16(sb[r]->sc[2 * chunk + 1]);
                    for (int c = 0; c < C; ++c) {
                        // dot_u8_i8_two_scales with one scale for both halves, as in dot_k4.
                        isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a_lo[c]), s_lo));
                        isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a_hi[c]), s_hi));
                    }
                }
            }
            float dmin[4] = {};
            for (int r = 0; r < R; ++r) dmin[r] = sb[r]->dmin;
            const __m128 dmin4 = _mm_loadu_ps(dmin);
            for (int c = 0; c < C; ++c) {
                const BlockQ8_K& yb = act[c][i];
                const __m256i bs = bsums(yb);
                // sum over groups of min * (bsums[2g] + bsums[2g + 1]), rows in lanes.
                __m256i m[4];
                for (int r = 0; r < 4; ++r)
                    m[r] = r < R ? _mm256_madd_epi16(load(sb[r]->mins), bs) : _mm256_setzero_si256();
                const __m128i sum_mins = hsum4_epi32(m[0], m[1], m[2], m[3]);
                mins[c] = _mm_fmadd_ps(_mm_mul_ps(dmin4, _mm_set1_ps(yb.d)), _mm_cvtepi32_ps(sum_mins), mins[c]);
                for (int r = 0; r < R; ++r)
                    acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(sb[r]->d * yb.d), _mm256_cvtepi32_ps(isum[r][c]), acc[r][c]);
            }
        }
        for (int c = 0; c < C; ++c) {
            float m[4];
            _mm_storeu_ps(m, mins[c]);
            for (int r = 0; r < R; ++r) y[c * y_stride + r] = hsum(acc[r][c]) - m[r];
        }
    }
};

// A Q6_K row's super-block fields, decoded once per gemm call: the scale pairs each quarter
// broadcasts (built from two int8 loads per row and quarter before).
struct alignas(32) Q6KScales {
    int32_t pair[16];  // sc[g] in both int16 halves, so one 32-bit broadcast fills a 128-bit half
    float d;
};

struct Q6K {
    using Block = quant::BlockQ6_K;
    using Scales = Q6KScales;
    static constexpr int kRows = 2;
    static constexpr int kCols = 4;

    static void decode(const Block& b, Scales* s) {
        s->d = fp16(b.d);
        for (int g = 0; g < 16; ++g) {
            const auto sc = static_cast<uint16_t>(static_cast<int16_t>(b.scales[g]));
            s->pair[g] = static_cast<int32_t>((static_cast<uint32_t>(sc) << 16) | sc);
        }
    }

    template <int R, int C>
    static void tile(int64_t k, const uint8_t* w, size_t w_stride, const Scales* s, size_t s_stride,
                     const uint8_t* a, size_t a_stride, float* y, size_t y_stride) {
        const gemm::Rows<Block, R> x(w, w_stride);
        const gemm::Rows<BlockQ8_K, C> act(a, a_stride);
        __m256 acc[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
        for (int64_t i = 0; i < k / kQKK; ++i) {
            const Scales* sb[R];
            for (int r = 0; r < R; ++r) sb[r] = s + r * s_stride + i;
            __m256i isum[R][C];
            for (int r = 0; r < R; ++r)
                for (int c = 0; c < C; ++c) isum[r][c] = _mm256_setzero_si256();
            for (int h = 0; h < 2; ++h) {
                for (int q = 0; q < 4; ++q) {
                    const int g = 8 * h + 2 * q;
                    __m256i av[C];
                    for (int c = 0; c < C; ++c) av[c] = load(act[c][i].qs + 128 * h + 32 * q);
                    for (int r = 0; r < R; ++r) {
                        // Signed values (level - 32), as vec_dot_q6_k_avx2 takes them.
                        const __m256i v = _mm256_sub_epi8(q6_k_levels(x[r][i], h, q), _mm256_set1_epi8(32));
                        const __m256i v_abs = _mm256_sign_epi8(v, v);
                        const __m256i sp = _mm256_set_m128i(_mm_set1_epi32(sb[r]->pair[g + 1]), _mm_set1_epi32(sb[r]->pair[g]));
                        for (int c = 0; c < C; ++c) {
                            const __m256i p = _mm256_maddubs_epi16(v_abs, _mm256_sign_epi8(av[c], v));
                            isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(p, sp));
                        }
                    }
                }
            }
            for (int c = 0; c < C; ++c) {
                for (int r = 0; r < R; ++r)
                    acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(sb[r]->d * act[c][i].d), _mm256_cvtepi32_ps(isum[r][c]), acc[r][c]);
            }
        }
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) y[c * y_stride + r] = hsum(acc[r][c]);
    }
};

// Every tile shape of Kernel, indexed (rows - 1) * kCols + (cols - 1) as in gemm::tile_table.
template <class Kernel>
using DecodedTileFn = void (*)(int64_t, const uint8_t*, size_t, const typename Kernel::Scales*, size_t, const uint8_t*,
                               size_t, float*, size_t);

template <class Kernel, size_t... I>
constexpr std::array<DecodedTileFn<Kernel>, sizeof...(I)> decoded_tiles(std::index_sequence<I...>) {
    return {&Kernel::template tile<static_cast<int>(I / Kernel::kCols) + 1, static_cast<int>(I % Kernel::kCols) + 1>...};
}

// gemm::run for kernels whose tiles read per-super-block scales decoded up front: the n_rows
// weight rows' scales are decoded once into per-thread scratch (n_rows x k / 256 entries: 16
// rows at k = 14336 are 56 KB of Q4KScales, 112 KB of Q6KScales), then met by every tile.
template <class Kernel>
void run_decoded(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc, float* y,
                 size_t ys) {
    static constexpr auto kTiles = decoded_tiles<Kernel>(std::make_index_sequence<Kernel::kRows * Kernel::kCols>());
    thread_local std::vector<typename Kernel::Scales> scales;
    const int64_t nb = k / kQKK;
    if (scales.size() < static_cast<size_t>(nr * nb)) scales.resize(static_cast<size_t>(nr * nb));
    for (int64_t r = 0; r < nr; ++r) {
        const auto* row = reinterpret_cast<const typename Kernel::Block*>(w + r * ws);
        for (int64_t i = 0; i < nb; ++i) Kernel::decode(row[i], &scales[r * nb + i]);
    }
    // The order of gemm::run: activation rows outermost so a tile's columns stay in L1.
    for (int64_t c0 = 0; c0 < nc; c0 += Kernel::kCols) {
        const int64_t tc = std::min<int64_t>(Kernel::kCols, nc - c0);
        for (int64_t r0 = 0; r0 < nr; r0 += Kernel::kRows) {
            const int64_t tr = std::min<int64_t>(Kernel::kRows, nr - r0);
            kTiles[(tr - 1) * Kernel::kCols + (tc - 1)](k, w + r0 * ws, ws, scales.data() + r0 * nb, nb, a + c0 * as, as,
                                                         y + c0 * ys + r0, ys);
        }
    }
}

}  // namespace

void gemm_q4_k_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    run_decoded<Q4K>(k, w, ws, nr, a, as, nc, y, ys);
}

void gemm_q6_k_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    run_decoded<Q6K>(k, w, ws, nr, a, as, nc, y, ys);
}

}  // namespace deskside::backends::cpu
