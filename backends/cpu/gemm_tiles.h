// The driver shared by the tiled gemm kernels: walks an (n_rows x n_cols) output block in tiles
// of Kernel::kRows weight rows x Kernel::kCols activation rows, with smaller tiles of the same
// kernel at the right and bottom edges. Header-only so that each *_avx2.cpp instantiates it with
// its own instruction-set flags.
//
// A Kernel provides kRows, kCols and
//   template <int R, int C> static void tile(int64_t k, const uint8_t* w, size_t w_stride,
//                                            const uint8_t* a, size_t a_stride, float* y, size_t y_stride);
// computing y[c * y_stride + r] for r < R, c < C exactly as the single-row kernel would.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace deskside::backends::cpu::gemm {

using TileFn = void (*)(int64_t k, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, float* y,
                        size_t y_stride);

// Every tile shape from 1 x 1 to kRows x kCols, indexed (rows - 1) * kCols + (cols - 1).
template <class Kernel, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tile_table(std::index_sequence<I...>) {
    return {&Kernel::template tile<static_cast<int>(I / Kernel::kCols) + 1, static_cast<int>(I % Kernel::kCols) + 1>...};
}

template <class Kernel>
void run(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* a, size_t a_stride,
         int64_t n_cols, float* y, size_t y_stride) {
    static constexpr auto kTiles = tile_table<Kernel>(std::make_index_sequence<Kernel::kRows * Kernel::kCols>());
    // Activation rows outermost: a tile's kCols activation rows stay in L1 while the weight rows
    // (a caller-sized chunk, small enough for L2) stream past them.
    for (int64_t c0 = 0; c0 < n_cols; c0 += Kernel::kCols) {
        const int64_t nc = std::min<int64_t>(Kernel::kCols, n_cols - c0);
        for (int64_t r0 = 0; r0 < n_rows; r0 += Kernel::kRows) {
            const int64_t nr = std::min<int64_t>(Kernel::kRows, n_rows - r0);
            kTiles[(nr - 1) * Kernel::kCols + (nc - 1)](k, w + r0 * w_stride, w_stride, a + c0 * a_stride, a_stride,
                                                        y + c0 * y_stride + r0, y_stride);
        }
    }
}

// Row pointers of a tile, typed.
template <class Block, int N>
struct Rows {
    const Block* p[N];
    Rows(const uint8_t* base, size_t stride) {
        for (int i = 0; i < N; ++i) p[i] = reinterpret_cast<const Block*>(base + i * stride);
    }
    const Block* operator[](int i) const { return p[i]; }
};

}  // namespace deskside::backends::cpu::gemm
