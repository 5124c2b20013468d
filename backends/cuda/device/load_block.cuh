// Device-only: copy one quant block from global memory into thread-local storage with the widest
// loads its address allows (128-bit where the block size and address are multiples of 16, e.g.
// Q4_K and Q5_K rows of a 16-aligned matrix; 32-bit for Q4_1, Q5_1, Q2_K, IQ4_XS; 16-bit
// otherwise, since every block is 2-aligned). The block code then reads the copy with byte
// arithmetic; small blocks stay in registers, the K-quant super-blocks (indexed per group in a
// loop) go to the thread's stack frame (ptxas: no spills, 96-224 bytes of stack).
#pragma once

#include <cstdint>

namespace deskside::backends::cuda::device {

template <class Block>
struct alignas(16) LocalBlock {
    Block b;
};

template <class Block>
__device__ inline void load_block(LocalBlock<Block>& dst, const Block* src) {
    constexpr int kBytes = sizeof(Block);
    const auto addr = reinterpret_cast<uintptr_t>(src);
    if constexpr (kBytes % 16 == 0) {
        if ((addr & 15) == 0) {
            const uint4* s = reinterpret_cast<const uint4*>(src);
            uint4* d = reinterpret_cast<uint4*>(&dst.b);
#pragma unroll
            for (int i = 0; i < kBytes / 16; ++i) d[i] = s[i];
            return;
        }
    }
    if constexpr (kBytes % 4 == 0) {
        if ((addr & 3) == 0) {
            const uint32_t* s = reinterpret_cast<const uint32_t*>(src);
            uint32_t* d = reinterpret_cast<uint32_t*>(&dst.b);
#pragma unroll
            for (int i = 0; i < kBytes / 4; ++i) d[i] = s[i];
            return;
        }
    }
    static_assert(kBytes % 2 == 0 && alignof(Block) >= 2, "every quant block is 2-aligned");
    const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
    uint16_t* d = reinterpret_cast<uint16_t*>(&dst.b);
#pragma unroll
    for (int i = 0; i < kBytes / 2; ++i) d[i] = s[i];
}

}  // namespace deskside::backends::cuda::device
