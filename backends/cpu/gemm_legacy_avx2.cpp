// AVX2 tiled gemm for the 32-element block formats dotted against Q8_0: Q4_0, Q5_0, Q8_0,
// IQ4_NL. Per block, each weight row's levels are decoded once and met by every activation row
// of the tile; each output keeps its own 8-lane float accumulator updated with the same
// sign/maddubs/madd integer sums and the same FMA as dot_signed_blocks in dot_legacy_avx2.cpp,
// so every output equals the single-row kernel's bit for bit.
#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/dot_levels_avx2.h"
#include "backends/cpu/gemm_isa.h"
#include "backends/cpu/gemm_tiles.h"
#include "quant/blocks.h"

namespace deskside::backends::cpu {

using namespace avx2;

namespace {

// 4 x 3 outputs. GCC keeps the 12 accumulators in memory (they do not fit the 16 ymm registers
// beside the levels), yet this measured ~5 % faster than 2 x 4, which fits the registers
// (docs/PERFORMANCE.md): the loop is bound by the integer multiply ports, not by the stores.
template <class WBlock>
struct SignedBlocks {
    static constexpr int kRows = 4;
    static constexpr int kCols = 3;

    template <int R, int C>
    static void tile(int64_t k, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, float* y,
                     size_t y_stride) {
        const gemm::Rows<WBlock, R> x(w, w_stride);
        const gemm::Rows<quant::BlockQ8_0, C> act(a, a_stride);
        __m256 acc[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
        for (int64_t i = 0; i < k / quant::kQK; ++i) {
            __m256i wl[R], wabs[R];
            float dw[R];
            for (int r = 0; r < R; ++r) {
                wl[r] = levels(x[r][i]);
                wabs[r] = _mm256_sign_epi8(wl[r], wl[r]);
                dw[r] = fp16(x[r][i].d);
            }
            for (int c = 0; c < C; ++c) {
                const __m256i av = load(act[c][i].qs);
                const float da = fp16(act[c][i].d);
                for (int r = 0; r < R; ++r) {
                    // dot_i8_i8(levels, activations), as the single-row kernel computes it.
                    const __m256i sums = dot_u8_i8(wabs[r], _mm256_sign_epi8(av, wl[r]));
                    acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(dw[r] * da), _mm256_cvtepi32_ps(sums), acc[r][c]);
                }
            }
        }
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) y[c * y_stride + r] = hsum(acc[r][c]);
    }
};

}  // namespace

void gemm_q4_0_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    gemm::run<SignedBlocks<quant::BlockQ4_0>>(k, w, ws, nr, a, as, nc, y, ys);
}

void gemm_q5_0_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    gemm::run<SignedBlocks<quant::BlockQ5_0>>(k, w, ws, nr, a, as, nc, y, ys);
}

void gemm_q8_0_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys) {
    gemm::run<SignedBlocks<quant::BlockQ8_0>>(k, w, ws, nr, a, as, nc, y, ys);
}

void gemm_iq4_nl_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                      float* y, size_t ys) {
    gemm::run<SignedBlocks<quant::BlockIq4Nl>>(k, w, ws, nr, a, as, nc, y, ys);
}

}  // namespace deskside::backends::cpu
