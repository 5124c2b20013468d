// Row conversion (kernels.h launch_convert_rows): copy, and set_rows into the KV cache.
// F32 -> F16 / BF16 / Q8_0 and back, bit-identical to quant/'s reference conversions (quant/float16.h
// through device/hd.cuh; Q8_0 as quant/ref_legacy.cpp from_float_q8_0: d = amax / 127, levels
// round(x * (1 / d)) half away from zero, d stored as F16). Rows of one type to the same type are
// copied as bytes.
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/device/hd.cuh"
#include "backends/cuda/kernels.h"
#include "quant/blocks.h"

namespace deskside::backends::cuda {
namespace {

using namespace device;
using quant::TypeId;

constexpr int kThreads = 256;
constexpr unsigned kMaxGridY = 65535;
constexpr int kQ8 = quant::kQK;  // elements of a Q8_0 block
constexpr size_t kQ8Bytes = sizeof(quant::BlockQ8_0);

__device__ inline void store_u16(uint8_t* p, uint16_t v) { *reinterpret_cast<uint16_t*>(p) = v; }
__device__ inline uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// One unit of a row: an element, or a Q8_0 block (32 elements) where either side is Q8_0.
template <TypeId kSrc, TypeId kDst>
__device__ inline void convert_unit(const uint8_t* src, uint8_t* dst, int64_t u) {
    if constexpr (kDst == TypeId::Q8_0) {
        static_assert(kSrc == TypeId::F32);
        const float* x = reinterpret_cast<const float*>(src) + u * kQ8;
        float amax = 0.0f;
        for (int j = 0; j < kQ8; ++j) {
            const float a = fabsf(x[j]);
            amax = amax < a ? a : amax;  // std::max(amax, a)
        }
        const float d = div_rn(amax, 127.0f);
        const float id = d != 0.0f ? div_rn(1.0f, d) : 0.0f;
        uint8_t* block = dst + u * kQ8Bytes;
        store_u16(block, fp32_to_fp16(d));
        for (int j = 0; j < kQ8; ++j)
            block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(roundf(mul_rn(x[j], id))));
    } else if constexpr (kSrc == TypeId::Q8_0) {
        static_assert(kDst == TypeId::F32);
        const uint8_t* block = src + u * kQ8Bytes;
        const float d = fp16_to_fp32(load_u16(block));
        float* y = reinterpret_cast<float*>(dst) + u * kQ8;
        for (int j = 0; j < kQ8; ++j) y[j] = mul_rn(static_cast<float>(static_cast<int8_t>(block[2 + j])), d);
    } else if constexpr (kSrc == TypeId::F32) {
        const float v = reinterpret_cast<const float*>(src)[u];
        if constexpr (kDst == TypeId::F32) reinterpret_cast<float*>(dst)[u] = v;
        else if constexpr (kDst == TypeId::F16) reinterpret_cast<uint16_t*>(dst)[u] = fp32_to_fp16(v);
        else reinterpret_cast<uint16_t*>(dst)[u] = fp32_to_bf16(v);
    } else {
        static_assert(kDst == TypeId::F32);
        const uint16_t h = reinterpret_cast<const uint16_t*>(src)[u];
        reinterpret_cast<float*>(dst)[u] = kSrc == TypeId::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
    }
}

// Grid: x covers a row's units, y the rows (looping past kMaxGridY). rows: dst row of src row r,
// or nullptr for r itself.
template <TypeId kSrc, TypeId kDst>
__global__ void convert_kernel(const uint8_t* src, size_t src_stride, uint8_t* dst, size_t dst_stride,
                               const int32_t* rows, int64_t units, int64_t n_rows) {
    const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= units) return;
    for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
        const int64_t to = rows ? rows[r] : r;
        convert_unit<kSrc, kDst>(src + r * src_stride, dst + to * dst_stride, u);
    }
}

// Same type with a row map: the row's bytes, one byte per thread.
__global__ void scatter_bytes_kernel(const uint8_t* src, size_t src_stride, uint8_t* dst, size_t dst_stride,
                                     const int32_t* rows, int64_t row_bytes, int64_t n_rows) {
    const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (b >= row_bytes) return;
    for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) dst[rows[r] * dst_stride + b] = src[r * src_stride + b];
}

template <TypeId kSrc, TypeId kDst>
void launch_typed(cudaStream_t stream, const DevTensor& src, const DevTensor& dst, const int32_t* rows) {
    const bool blocks = kSrc == TypeId::Q8_0 || kDst == TypeId::Q8_0;
    const int64_t units = blocks ? src.ne0 / kQ8 : src.ne0;
    const dim3 grid(static_cast<unsigned>((units + kThreads - 1) / kThreads),
                    static_cast<unsigned>(std::min<int64_t>(src.ne1, kMaxGridY)));
    convert_kernel<kSrc, kDst><<<grid, kThreads, 0, stream>>>(src.data, src.row_stride, dst.data, dst.row_stride, rows,
                                                              units, src.ne1);
}

}  // namespace

void launch_convert_rows(cudaStream_t stream, const DevTensor& src, const DevTensor& dst, const int32_t* rows) {
    if (src.ne0 <= 0 || src.ne1 <= 0) return;
    if (src.type == dst.type) {
        const size_t row_bytes = quant::row_bytes(src.type, src.ne0);
        if (!rows) {
            // A single row may come with any stride; the copy wants pitches of at least a row.
            const size_t src_pitch = src.ne1 == 1 ? row_bytes : src.row_stride;
            const size_t dst_pitch = dst.ne1 == 1 ? row_bytes : dst.row_stride;
            // Errors surface through cudaGetLastError like a kernel's.
            cudaMemcpy2DAsync(dst.data, dst_pitch, src.data, src_pitch, row_bytes, static_cast<size_t>(src.ne1),
                              cudaMemcpyDeviceToDevice, stream);
            return;
        }
        const dim3 grid(static_cast<unsigned>((row_bytes + kThreads - 1) / kThreads),
                        static_cast<unsigned>(std::min<int64_t>(src.ne1, kMaxGridY)));
        scatter_bytes_kernel<<<grid, kThreads, 0, stream>>>(src.data, src.row_stride, dst.data, dst.row_stride, rows,
                                                            static_cast<int64_t>(row_bytes), src.ne1);
        return;
    }
    // Other pairs are refused by the backend's checks.
    if (src.type == TypeId::F32) {
        switch (dst.type) {
            case TypeId::F16: launch_typed<TypeId::F32, TypeId::F16>(stream, src, dst, rows); return;
            case TypeId::BF16: launch_typed<TypeId::F32, TypeId::BF16>(stream, src, dst, rows); return;
            case TypeId::Q8_0: launch_typed<TypeId::F32, TypeId::Q8_0>(stream, src, dst, rows); return;
            default: return;
        }
    }
    if (dst.type != TypeId::F32) return;
    switch (src.type) {
        case TypeId::F16: launch_typed<TypeId::F16, TypeId::F32>(stream, src, dst, rows); return;
        case TypeId::BF16: launch_typed<TypeId::BF16, TypeId::F32>(stream, src, dst, rows); return;
        case TypeId::Q8_0: launch_typed<TypeId::Q8_0, TypeId::F32>(stream, src, dst, rows); return;
        default: return;
    }
}

}  // namespace deskside::backends::cuda
