// get_rows on the GPU (kernels.h): dst row i = table row ids[i] as F32, through device::dequantize
// (quant::to_float's bits, tested on the host in tests/backends/test_cuda_device_code.cpp).
// One thread per block of a quantized table, per element of a float one; simple rather than fast.
#include <cuda_runtime.h>

#include "backends/cuda/device/block_dot.cuh"
#include "backends/cuda/device/load_block.cuh"
#include "backends/cuda/kernels.h"

namespace deskside::backends::cuda {
namespace {

using namespace device;

constexpr int kThreadsPerCta = 128;

// `per_row` items (blocks, or elements of a float table) per row of dst.
template <class T>
__global__ void get_rows_kernel(const uint8_t* table, size_t table_stride, const int32_t* ids, int64_t n_ids,
                                int64_t per_row, uint8_t* dst, size_t dst_stride) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= per_row * n_ids) return;
    const int64_t r = i / per_row, b = i % per_row;
    const uint8_t* src = table + static_cast<int64_t>(ids[r]) * table_stride;
    float* out = reinterpret_cast<float*>(dst + r * dst_stride);
    if constexpr (T::kFloat) {
        using E = typename T::Element;
        const E e = reinterpret_cast<const E*>(src)[b];
        if constexpr (sizeof(E) == 4) out[b] = e;
        else if constexpr (T::kActType == quant::TypeId::BF16) out[b] = bf16_to_fp32(e);
        else out[b] = fp16_to_fp32(e);
    } else {
        using Block = typename T::Block;
        const Block* block = reinterpret_cast<const Block*>(src) + b;
        if constexpr (sizeof(Block) % 2 == 0 && alignof(Block) >= 2) {
            LocalBlock<Block> blk;
            load_block(blk, block);
            dequantize(blk.b, out + b * T::kElems);
        } else {
            // MXFP4 (17 bytes, odd addresses) and IQ1_M (byte fields): read in place, as their
            // dequantize expects.
            dequantize(*block, out + b * T::kElems);
        }
    }
}

}  // namespace

void launch_get_rows(cudaStream_t stream, const DevTensor& table, const int32_t* ids, int64_t n_ids,
                     const DevTensor& dst) {
    if (n_ids <= 0 || table.ne0 <= 0) return;
    device::visit_weight_type(table.type, [&](auto traits) {
        using T = decltype(traits);
        const int64_t per_row = T::kFloat ? table.ne0 : table.ne0 / T::kElems;
        const auto ctas = static_cast<unsigned>((per_row * n_ids + kThreadsPerCta - 1) / kThreadsPerCta);
        get_rows_kernel<T><<<ctas, kThreadsPerCta, 0, stream>>>(table.data, table.row_stride, ids, n_ids, per_row,
                                                                dst.data, dst.row_stride);
    });
}

}  // namespace deskside::backends::cuda
