// Pieces shared by the tiled gemm kernels (gemm_*_avx2.cpp). Header-only so that each
// *_avx2.cpp instantiates them with its own instruction-set flags.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deskside::backends::cpu::gemm {

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
