// AVX2 tiled gemm for the 32-element block formats dotted against Q8_0: Q4_0, Q5_0, Q8_0,
// IQ4_NL, MXFP4 (twin: dot_tq_mxfp4_avx2.cpp). A tile is one weight row against up to eight activation rows: per block, the row's
// levels are decoded once and met by every activation row; each output keeps its own 8-lane
// float accumulator updated with the same sign/maddubs/madd integer sums and the same FMA as
// dot_signed_blocks in dot_legacy_avx2.cpp, so every output equals the single-row kernel's bit
// for bit.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/dot_levels_avx2.h"
#include "backends/cpu/gemm_isa.h"
#include "backends/cpu/gemm_tiles.h"
#include "quant/blocks.h"

namespace deskside::backends::cpu {

using namespace avx2;

namespace {

// Activation rows per tile. Eight accumulators, the row's levels and their absolute values,
// its scale and the activation being met fill 12 of the 16 ymm registers. (Tiles of 4 rows x 3
// columns, the previous shape, hold 12 accumulators in memory and decode each block of an
// 8-column batch three times.)
constexpr int kTileCols = 8;

template <class WBlock>
struct SignedBlocks {
    // y[c * y_stride] for c < C: weight row w against activation rows a + c * a_stride, whose
    // block scales as floats are da[i * kTileCols + c] (block i).
    template <int C>
    static void tile(int64_t nb, const uint8_t* w, const uint8_t* a, size_t a_stride, const float* da, float* y,
                     size_t y_stride) {
        const auto* x = reinterpret_cast<const WBlock*>(w);
        const gemm::Rows<quant::BlockQ8_0, C> act(a, a_stride);
        __m256 acc[C];
        // Unrolled by pragma: left to itself GCC keeps a copy of every accumulator in
        // memory and stores it at each block (7 % slower).
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; ++i) {
            const __m256i wl = levels(x[i]);
            const __m256i wabs = _mm256_sign_epi8(wl, wl);
            const __m256 dw = _mm256_set1_ps(block_scale(x[i]));
#pragma GCC unroll 8
            for (int c = 0; c < C; ++c) {
                // dot_i8_i8(levels, activations), as the single-row kernel computes it. The scale
                // d_w * d_a is exact in float (two 11-bit significands), so the vector product
                // equals the single-row kernel's scalar one.
                const __m256i av = load(act[c][i].qs);
                const __m256 dac = _mm256_broadcast_ss(da + i * kTileCols + c);
                const __m256i sums = dot_u8_i8(wabs, _mm256_sign_epi8(av, wl));
                acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dac), _mm256_cvtepi32_ps(sums), acc[c]);
            }
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) y[c * y_stride] = hsum(acc[c]);
    }
};

using TileFn = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, const float*, float*, size_t);

// tile<C> for C = 1 .. kTileCols, indexed C - 1.
template <class Kernel, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tile_table(std::index_sequence<I...>) {
    return {&Kernel::template tile<static_cast<int>(I) + 1>...};
}

// Columns in tiles of at most eight (of equal width, so that 9 columns are 5 + 4, not 8 + 1 with
// one lone accumulator chain), the weight rows one after another within a tile: a task's rows
// are read as one sequential stream, which the hardware prefetcher follows. Tiles of four rows
// read four interleaved streams and ran at half speed on rows that came from DRAM, the case of a
// large output head at every decode step (docs/PERFORMANCE.md, session 4); software prefetch of
// the next rows did not help.
template <class Kernel>
void run(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc, float* y,
         size_t ys) {
    static constexpr auto kTiles = tile_table<Kernel>(std::make_index_sequence<kTileCols>());
    const int64_t nb = k / quant::kQK;
    const int64_t col_tiles = (nc + kTileCols - 1) / kTileCols;
    const int64_t width = (nc + col_tiles - 1) / col_tiles;
    // The activation scales as floats, converted once per call rather than once per weight row;
    // tile t's scales start at t * nb * kTileCols, block-major within it.
    thread_local std::vector<float> da;
    da.resize(static_cast<size_t>(col_tiles * nb * kTileCols));
    for (int64_t c = 0; c < nc; ++c) {
        const auto* blocks = reinterpret_cast<const quant::BlockQ8_0*>(a + c * as);
        float* dst = da.data() + (c / width) * nb * kTileCols + c % width;
        for (int64_t i = 0; i < nb; ++i) dst[i * kTileCols] = fp16(blocks[i].d);
    }
    for (int64_t t = 0; t < col_tiles; ++t) {
        const int64_t c0 = t * width;
        const TileFn tile = kTiles[std::min(width, nc - c0) - 1];
        const float* scales = da.data() + t * nb * kTileCols;
        for (int64_t r = 0; r < nr; ++r) tile(nb, w + r * ws, a + c0 * as, as, scales, y + c0 * ys + r, ys);
    }
}

}  // namespace

void gemm_q4_0_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    run<SignedBlocks<quant::BlockQ4_0>>(k, w, ws, nr, a, as, nc, y, ys);
}

void gemm_q5_0_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    run<SignedBlocks<quant::BlockQ5_0>>(k, w, ws, nr, a, as, nc, y, ys);
}

void gemm_q8_0_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    run<SignedBlocks<quant::BlockQ8_0>>(k, w, ws, nr, a, as, nc, y, ys);
}

void gemm_iq4_nl_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                      float* y, size_t ys) {
    run<SignedBlocks<quant::BlockIq4Nl>>(k, w, ws, nr, a, as, nc, y, ys);
}

void gemm_mxfp4_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                     float* y, size_t ys) {
    run<SignedBlocks<quant::BlockMxfp4>>(k, w, ws, nr, a, as, nc, y, ys);
}

}  // namespace deskside::backends::cpu
