// AVX2 matmul kernels for the x8 (row-interleaved) Q4_0, Q8_0, Q4_K and Q6_K layouts of repack.h.
//
// A group block holds 4 bytes of each of the 8 rows side by side in every 32-byte chunk. One
// chunk's levels times a broadcast of the 4 matching activation bytes (maddubs) give, in int16
// lanes 2r and 2r + 1, partial sums of row r; adding the chunks of a block (or of a K-quant
// group) and one madd leave row r's exact integer block sum in int32 lane r. No horizontal sums:
// lane r of one float accumulator is output row r, updated once per block with one FMA (Q4_0x8,
// Q4_Kx8; Q8_0x8 and Q6_Kx8 keep 8 such accumulators, one per lane of the plain vec_dot, see
// lane_tree below).
//
// Batch invariance: the integer sums are exact, and the float work per output (block scale
// product, one FMA per block in block order, and for Q4_K the min chain and one subtraction) is
// the same for every tile width C, so a decode (C = 1) equals a prompt tile bit for bit.
// ref: quant/ref_legacy.cpp (Q4_0, Q8_0 . Q8_0), quant/ref_q4_q5_k.cpp (Q4_K . Q8_K),
//      quant/ref_q6_q8_k.cpp (Q6_K . Q8_K)
#include <algorithm>
#include <cstring>

#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/repack.h"
#include "quant/blocks.h"

namespace deskside::backends::cpu {

using namespace avx2;

namespace {

constexpr size_t kQ40GroupBlock = 144;
constexpr size_t kQ80GroupBlock = 272;
constexpr size_t kQ4KGroupBlock = 1152;
constexpr size_t kQ6KGroupBlock = 1680;

// 4 activation bytes copied into every 32-bit lane.
inline __m256i broadcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// Starts loading the next group while this one is computed: decoding streams every weight once
// from DRAM (see kPrefetchRows in ops_quantized.cpp).
inline void prefetch_block(const uint8_t* p, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}

struct Q40Tile {
    static constexpr int kCols = 4;  // activation rows per tile: 4 accumulators plus the decoded chunk

    template <int C>
    static void run(int64_t nb, const uint8_t* g, const uint8_t* next, const uint8_t* a, size_t as, const int16_t* sums,
                    size_t ss, float* y, size_t ys) {
        const __m256i nibble = _mm256_set1_epi8(0x0F);
        const __m256i ones = _mm256_set1_epi16(1);
        __m256 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = g + b * kQ40GroupBlock;
            if (next) prefetch_block(next + b * kQ40GroupBlock, kQ40GroupBlock);
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
            const quant::BlockQ8_0* act[C];
            for (int c = 0; c < C; ++c) act[c] = reinterpret_cast<const quant::BlockQ8_0*>(a + c * as) + b;
            __m256i s16[C];
            for (int c = 0; c < C; ++c) s16[c] = _mm256_setzero_si256();
            for (int t = 0; t < 4; ++t) {
                const __m256i q = load(blk + 16 + 32 * t);
                const __m256i lo = _mm256_and_si256(q, nibble);                         // elements 4t..4t+3
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);  // elements 16+4t..
                for (int c = 0; c < C; ++c) {
                    // 16 products of at most 15 * 128 per int16 lane over the block: no overflow.
                    s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(lo, broadcast4(act[c]->qs + 4 * t)));
                    s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(hi, broadcast4(act[c]->qs + 16 + 4 * t)));
                }
            }
            for (int c = 0; c < C; ++c) {
                // Levels are stored as value + 8: subtract 8 * (sum of the activation block).
                const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(s16[c], ones),
                                                      _mm256_set1_epi32(8 * sums[c * ss + b]));
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(fp16(act[c]->d)));
                acc[c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(y + c * ys, acc[c]);
    }
};

// The Q8_0x8 and Q6_Kx8 tiles reproduce the plain single-row kernels (vec_dot_q8_0_avx2,
// vec_dot_q6_k_avx2) bit for bit: those keep 8 float lanes per row, lane l fed by the integer
// sum of elements 4l..4l+3 of each 32-element piece, and end with hsum. Chunk t of a group
// block holds exactly lane t's elements of the 8 rows, so lane_acc[t] lane r is row r's lane t,
// and the final tree below is hsum's. Both layouts therefore give the plain layout's results.
inline __m256 lane_tree(const __m256* v) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6])),
                         _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7])));
}

struct Q80Tile {
    static constexpr int kCols = 2;  // 16 lane accumulators per 2 columns

    template <int C>
    static void run(int64_t nb, const uint8_t* g, const uint8_t* next, const uint8_t* a, size_t as, const int16_t*,
                    size_t, float* y, size_t ys) {
        const __m256i ones = _mm256_set1_epi16(1);
        __m256 acc[C][8];
        for (int c = 0; c < C; ++c)
            for (int t = 0; t < 8; ++t) acc[c][t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = g + b * kQ80GroupBlock;
            if (next) prefetch_block(next + b * kQ80GroupBlock, kQ80GroupBlock);
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
            const quant::BlockQ8_0* act[C];
            __m256 d[C];
            for (int c = 0; c < C; ++c) {
                act[c] = reinterpret_cast<const quant::BlockQ8_0*>(a + c * as) + b;
                d[c] = _mm256_mul_ps(dw, _mm256_set1_ps(fp16(act[c]->d)));
            }
            // Unrolled so that acc[c][t] stays in registers (a runtime t would index memory).
#pragma GCC unroll 8
            for (int t = 0; t < 8; ++t) {
                // dot_i8_i8 as the single-row kernel computes it: |q| (read as unsigned) times
                // the activations with q's sign.
                const __m256i q = load(blk + 16 + 32 * t);
                const __m256i q_abs = _mm256_sign_epi8(q, q);
                for (int c = 0; c < C; ++c) {
                    const __m256i s = _mm256_sign_epi8(broadcast4(act[c]->qs + 4 * t), q);
                    const __m256i isum = _mm256_madd_epi16(_mm256_maddubs_epi16(q_abs, s), ones);
                    acc[c][t] = _mm256_fmadd_ps(d[c], _mm256_cvtepi32_ps(isum), acc[c][t]);
                }
            }
        }
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(y + c * ys, lane_tree(acc[c]));
    }
};

// The 64 6-bit values of a Q4_Kx8 scale or min field as bytes 8 s + r: groups 0-3 in *lo,
// groups 4-7 in *hi (encoding in repack.h).
inline void six_bit_values(const uint8_t* p, __m256i* lo, __m256i* hi) {
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i two = _mm256_set1_epi8(3);
    const __m256i low4 = load(p);
    const __m256i top = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
    // Bits 2q..2q+1 of byte j belong to value j + 16 q: q = 0, 1 for the low/high 128-bit half
    // of *lo, q = 2, 3 for *hi.
    const __m256i top_lo = _mm256_and_si256(_mm256_srlv_epi64(top, _mm256_set_epi64x(2, 2, 0, 0)), two);
    const __m256i top_hi = _mm256_and_si256(_mm256_srlv_epi64(top, _mm256_set_epi64x(6, 6, 4, 4)), two);
    *lo = _mm256_or_si256(_mm256_and_si256(low4, nibble), _mm256_slli_epi16(top_lo, 4));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low4, 4), nibble), _mm256_slli_epi16(top_hi, 4));
}

// Bytes 8s..8s+7 (s even: the half's first 8, odd: its last 8) of a 16-byte half widened to
// int16, each repeated: lanes 2r and 2r + 1 hold row r's value.
inline __m256i repeat_rows(__m128i half, bool odd) {
    const __m128i even_pattern = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m128i odd_pattern = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(half, odd ? odd_pattern : even_pattern));
}

// The half's two groups interleaved and widened: lanes 2r, 2r + 1 = row r's (first, second).
inline __m256i pair_rows(__m128i half) {
    return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(half, _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15)));
}

inline __m128i half_of(__m256i v, int h) { return h == 0 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1); }

struct Q4KTile {
    static constexpr int kCols = 4;  // 8 accumulators

    template <int C>
    static void run(int64_t nb, const uint8_t* g, const uint8_t* next, const uint8_t* a, size_t as, const int16_t*,
                    size_t, float* y, size_t ys) {
        const __m256i nibble = _mm256_set1_epi8(0x0F);
        __m256 acc_d[C], acc_m[C];
        for (int c = 0; c < C; ++c) acc_d[c] = acc_m[c] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = g + b * kQ4KGroupBlock;
            if (next) prefetch_block(next + b * kQ4KGroupBlock, kQ4KGroupBlock);
            const quant::BlockQ8_K* act[C];
            for (int c = 0; c < C; ++c) act[c] = reinterpret_cast<const quant::BlockQ8_K*>(a + c * as) + b;
            __m256i sc[2], mn[2];  // groups 0-3, 4-7
            six_bit_values(blk + 32, &sc[0], &sc[1]);
            six_bit_values(blk + 80, &mn[0], &mn[1]);

            __m256i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
            for (int j = 0; j < 4; ++j) {  // 64-element part j: groups 2j (low nibbles), 2j + 1 (high)
                __m256i s_lo[C], s_hi[C];
                for (int c = 0; c < C; ++c) s_lo[c] = s_hi[c] = _mm256_setzero_si256();
                for (int t = 0; t < 8; ++t) {
                    const __m256i q = load(blk + 128 + 32 * (8 * j + t));
                    const __m256i lo = _mm256_and_si256(q, nibble);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
                    for (int c = 0; c < C; ++c) {
                        const int8_t* qa = act[c]->qs + 64 * j + 4 * t;
                        s_lo[c] = _mm256_add_epi16(s_lo[c], _mm256_maddubs_epi16(lo, broadcast4(qa)));
                        s_hi[c] = _mm256_add_epi16(s_hi[c], _mm256_maddubs_epi16(hi, broadcast4(qa + 32)));
                    }
                }
                // Groups 2j and 2j + 1 are the two 8-byte halves of 128-bit half j % 2 of sc[j / 2].
                const __m128i half = half_of(sc[j / 2], j % 2);
                const __m256i scale_lo = repeat_rows(half, false), scale_hi = repeat_rows(half, true);
                for (int c = 0; c < C; ++c) {
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s_lo[c], scale_lo));
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s_hi[c], scale_hi));
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
            const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
            for (int c = 0; c < C; ++c) {
                // Offset term: sum over groups s of min[r][s] * (activation sum of group s),
                // two groups per madd.
                const int16_t* bs = act[c]->bsums;
                __m256i msum = _mm256_setzero_si256();
                for (int v = 0; v < 4; ++v) {
                    const uint32_t s0 = static_cast<uint16_t>(bs[4 * v] + bs[4 * v + 1]);
                    const uint32_t s1 = static_cast<uint16_t>(bs[4 * v + 2] + bs[4 * v + 3]);
                    const __m256i pair = _mm256_set1_epi32(static_cast<int32_t>(s0 | (s1 << 16)));
                    msum = _mm256_add_epi32(msum, _mm256_madd_epi16(pair_rows(half_of(mn[v / 2], v % 2)), pair));
                }
                const __m256 da = _mm256_set1_ps(act[c]->d);
                acc_d[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum[c]), acc_d[c]);
                acc_m[c] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(msum), acc_m[c]);
            }
        }
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(y + c * ys, _mm256_sub_ps(acc_d[c], acc_m[c]));
    }
};

// 8 signed bytes (row r's value at byte r) widened to int16 and repeated: lanes 2r, 2r + 1.
inline __m256i repeat_rows_signed(const uint8_t* p) {
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(v, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)));
}

struct Q6KTile {
    static constexpr int kCols = 2;

    template <int C>
    static void run(int64_t nb, const uint8_t* g, const uint8_t* next, const uint8_t* a, size_t as, const int16_t*,
                    size_t, float* y, size_t ys) {
        const __m256i nibble = _mm256_set1_epi8(0x0F);
        const __m256i bits45 = _mm256_set1_epi8(0x30);
        const __m256i k32 = _mm256_set1_epi8(32);
        __m256 acc[C][8];
        for (int c = 0; c < C; ++c)
            for (int t = 0; t < 8; ++t) acc[c][t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = g + b * kQ6KGroupBlock;
            if (next) prefetch_block(next + b * kQ6KGroupBlock, kQ6KGroupBlock);
            const uint8_t* scales = blk + 16;
            const quant::BlockQ8_K* act[C];
            for (int c = 0; c < C; ++c) act[c] = reinterpret_cast<const quant::BlockQ8_K*>(a + c * as) + b;

            // isum[c][t] lane r: row r's lane t of vec_dot_q6_k_avx2's integer sum (exact).
            __m256i isum[C][8];
            for (int c = 0; c < C; ++c)
                for (int t = 0; t < 8; ++t) isum[c][t] = _mm256_setzero_si256();
            for (int j = 0; j < 4; ++j) {  // 64-element part j: groups 4j..4j+3 of 16
                const uint8_t* high = blk + 144 + 384 * j;  // then the 8 low-nibble chunks
                __m256i sc[4];
                for (int s = 0; s < 4; ++s) sc[s] = repeat_rows_signed(scales + 8 * (4 * j + s));
                // Unrolled: t picks shifts, scales and accumulators at compile time.
#pragma GCC unroll 8
                for (int t = 0; t < 8; ++t) {
                    const __m256i q = load(high + 128 + 32 * t);
                    const __m256i h = load(high + 32 * (t % 4));
                    // Bits 4-5 of the low nibbles' levels are at 2s..2s+1 (s = t / 4), of the
                    // high nibbles' at 2s + 4..2s + 5; both are moved to bits 4-5.
                    const __m256i h_lo = t < 4 ? _mm256_slli_epi16(h, 4) : _mm256_slli_epi16(h, 2);
                    const __m256i h_hi = t < 4 ? h : _mm256_srli_epi16(h, 2);
                    // Signed values (level - 32), as vec_dot_q6_k_avx2 takes them.
                    const __m256i lo = _mm256_sub_epi8(
                        _mm256_or_si256(_mm256_and_si256(q, nibble), _mm256_and_si256(h_lo, bits45)), k32);
                    const __m256i hi = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), nibble),
                                                                       _mm256_and_si256(h_hi, bits45)),
                                                       k32);
                    const __m256i lo_abs = _mm256_sign_epi8(lo, lo), hi_abs = _mm256_sign_epi8(hi, hi);
                    // Elements 64j + 4t.. are in group 4j + t / 4, 64j + 32 + 4t.. in 4j + 2 + t / 4.
                    const __m256i sc_lo = sc[t / 4], sc_hi = sc[2 + t / 4];
                    for (int c = 0; c < C; ++c) {
                        // |value| <= 32 times activations of at most 127: pair sums fit int16.
                        const int8_t* qa = act[c]->qs + 64 * j + 4 * t;
                        const __m256i a_lo = _mm256_sign_epi8(broadcast4(qa), lo), a_hi = _mm256_sign_epi8(broadcast4(qa + 32), hi);
                        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo_abs, a_lo), sc_lo);
                        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi_abs, a_hi), sc_hi);
                        isum[c][t] = _mm256_add_epi32(isum[c][t], _mm256_add_epi32(p_lo, p_hi));
                    }
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
            for (int c = 0; c < C; ++c) {
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(act[c]->d));
                for (int t = 0; t < 8; ++t) acc[c][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[c][t]), acc[c][t]);
            }
        }
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(y + c * ys, lane_tree(acc[c]));
    }
};

// Columns in tiles of Tile::kCols (activation rows stay in L1 while the groups pass), groups inner.
template <class Tile, int kBlock, size_t kGroupBlock>
void run_groups(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a, size_t as,
                const int16_t* sums, size_t ss, int64_t n_cols, float* y, size_t ys) {
    const int64_t nb = k / kBlock;
    const size_t group_bytes = static_cast<size_t>(nb) * kGroupBlock;
    constexpr int kCols = Tile::kCols;
    static_assert(kCols == 2 || kCols == 4);
    for (int64_t c0 = 0; c0 < n_cols; c0 += kCols) {
        const int64_t nc = std::min<int64_t>(kCols, n_cols - c0);
        const uint8_t* ac = a + c0 * as;
        const int16_t* sc = sums ? sums + c0 * ss : nullptr;
        for (int64_t gi = 0; gi < n_groups; ++gi) {
            const uint8_t* g = w + gi * group_bytes;
            // Only the first column tile brings weights in; later ones find them cached.
            const uint8_t* next = c0 == 0 && gi + 1 < prefetch_groups ? g + group_bytes : nullptr;
            float* yg = y + c0 * ys + gi * kRepackRows;
            if (nc == 1) {
                Tile::template run<1>(nb, g, next, ac, as, sc, ss, yg, ys);
            } else if constexpr (kCols == 2) {
                Tile::template run<2>(nb, g, next, ac, as, sc, ss, yg, ys);
            } else {
                switch (nc) {
                    case 2: Tile::template run<2>(nb, g, next, ac, as, sc, ss, yg, ys); break;
                    case 3: Tile::template run<3>(nb, g, next, ac, as, sc, ss, yg, ys); break;
                    default: Tile::template run<4>(nb, g, next, ac, as, sc, ss, yg, ys); break;
                }
            }
        }
    }
}

}  // namespace

void gemm_q4_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a,
                      size_t a_stride, const int16_t* a_sums, size_t sums_stride, int64_t n_cols, float* y, size_t y_stride) {
    run_groups<Q40Tile, quant::kQK, kQ40GroupBlock>(k, w, n_groups, prefetch_groups, a, a_stride, a_sums, sums_stride, n_cols, y, y_stride);
}

void gemm_q8_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a,
                      size_t a_stride, const int16_t* a_sums, size_t sums_stride, int64_t n_cols, float* y, size_t y_stride) {
    run_groups<Q80Tile, quant::kQK, kQ80GroupBlock>(k, w, n_groups, prefetch_groups, a, a_stride, a_sums, sums_stride, n_cols, y, y_stride);
}

void gemm_q4_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a,
                      size_t a_stride, const int16_t* a_sums, size_t sums_stride, int64_t n_cols, float* y, size_t y_stride) {
    run_groups<Q4KTile, quant::kQKK, kQ4KGroupBlock>(k, w, n_groups, prefetch_groups, a, a_stride, a_sums, sums_stride, n_cols, y, y_stride);
}

void gemm_q6_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a,
                      size_t a_stride, const int16_t* a_sums, size_t sums_stride, int64_t n_cols, float* y, size_t y_stride) {
    run_groups<Q6KTile, quant::kQKK, kQ6KGroupBlock>(k, w, n_groups, prefetch_groups, a, a_stride, a_sums, sums_stride, n_cols, y, y_stride);
}

}  // namespace deskside::backends::cpu
