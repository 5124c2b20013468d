// Causal attention over the paged KV cache on the GPU (kernels.h), with the semantics of
// Backend::attention as the CPU backend implements it (backends/cpu/ops_attention.cpp): query
// head h reads KV head h / (n_head / n_head_kv); query i at position pos sees positions
// max(0, pos - window + 1) ..= pos through its block table; score = (q . k) * scale, with q first
// rounded to K's dot type (F16 for an F16 cache, Q8_0 with the x86 activation quantizer for a
// Q8_0 cache); online softmax in position order; the V accumulator rounded to F16 after each
// step when V is F16.
//
// Flash decoding: a query's positions are cut at fixed multiples of kAttentionSplit (part j
// holds positions [j * kAttentionSplit, (j + 1) * kAttentionSplit), the last part of the cache
// everything beyond), so the parts depend on the positions alone, never on the batch. One warp
// runs one (part, query, head) in position order and leaves its max, sum and accumulator in
// scratch; a second kernel merges a query's parts in ascending order (device/attention_math.cuh).
// With a single part (positions < kAttentionSplit) the arithmetic is the CPU's but for the
// order of the q . k sum (here: lane l sums elements l, l + 32, ... by fma, then the warp's
// fixed butterfly; Q8_0: one block per lane), so results agree with the CPU within float
// rounding, not bit for bit.
//
// Attention sinks (AttentionParams::sinks) join in the merge, after the last part, as the CPU
// takes them after its last position: one more softmax_add of the sink's logit, whose rescale
// multiplies the accumulator (without F16 rounding) and which adds no value.
//
// Simple rather than fast: one warp per CTA, one position at a time (the K and V rows of a
// position are read by one warp, coalesced across lanes), q and the accumulator in shared memory.
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/device/attention_math.cuh"
#include "backends/cuda/device/block_dot.cuh"
#include "backends/cuda/kernels.h"

namespace deskside::backends::cuda {
namespace {

using namespace device;

struct AttentionShape {
    int64_t n_head, group, head_dim, head_dim_v;
    float scale;
    int64_t window;
    int64_t block_size;
    int64_t n_parts;  // parts of the longest possible context (the cache)
    size_t k_head_bytes, v_head_bytes;
};

int64_t parts_for(int64_t cache_rows) {
    return std::max<int64_t>(1, (cache_rows + kAttentionSplit - 1) / kAttentionSplit);
}

// Floats of scratch per (query, head, part): max, sum, then the accumulator.
__host__ __device__ inline int64_t part_floats(const AttentionShape& s) { return s.head_dim_v + 2; }

__device__ inline int64_t first_visible(int64_t pos, int64_t window) {
    return window > 0 ? max(static_cast<int64_t>(0), pos - window + 1) : 0;
}

// The part of position p (the last part takes everything beyond the cache's parts).
__device__ inline int64_t part_of(int64_t p, int64_t n_parts) { return min(p / kAttentionSplit, n_parts - 1); }

__device__ inline float warp_sum(float v) {
#pragma unroll
    for (int offset = kWarpLanes / 2; offset > 0; offset /= 2) v = add_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
    return v;
}

// q . k for one K head row; q in shared memory in K's dot type (floats for F32 / F16 K, already
// rounded to F16 for F16 K; Q8_0 blocks for Q8_0 K). Every lane returns the same value.
template <quant::TypeId KType>
__device__ inline float qk_dot(const void* q, const uint8_t* k, int64_t head_dim, int lane) {
    float partial = 0.0f;
    if constexpr (KType == quant::TypeId::Q8_0) {
        const auto* qb = static_cast<const BlockQ8_0*>(q);
        const auto* kb = reinterpret_cast<const BlockQ8_0*>(k);
        for (int64_t b = lane; b < head_dim / kQK; b += kWarpLanes) partial = add_rn(partial, block_dot(kb[b], qb[b]));
    } else {
        const auto* qf = static_cast<const float*>(q);
        for (int64_t d = lane; d < head_dim; d += kWarpLanes) {
            float kv;
            if constexpr (KType == quant::TypeId::F16) kv = fp16_to_fp32(reinterpret_cast<const uint16_t*>(k)[d]);
            else kv = reinterpret_cast<const float*>(k)[d];
            partial = fma_rn(kv, qf[d], partial);
        }
    }
    return warp_sum(partial);
}

// Element d of a V head row as F32 (quant::to_float's value).
template <quant::TypeId VType>
__device__ inline float v_element(const uint8_t* v, int64_t d) {
    if constexpr (VType == quant::TypeId::Q8_0) {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(v) + d / kQK;
        return mul_rn(static_cast<float>(b->qs[d % kQK]), fp16_to_fp32(b->d));
    } else if constexpr (VType == quant::TypeId::F16) {
        return fp16_to_fp32(reinterpret_cast<const uint16_t*>(v)[d]);
    } else {
        return reinterpret_cast<const float*>(v)[d];
    }
}

// Bytes of shared memory for q in K's dot type, rounded up to 16.
size_t q_shared_bytes(quant::TypeId k_type, int64_t head_dim) {
    const size_t bytes = k_type == quant::TypeId::Q8_0 ? quant::row_bytes(quant::TypeId::Q8_0, head_dim)
                                                       : static_cast<size_t>(head_dim) * sizeof(float);
    return (bytes + 15) / 16 * 16;
}

// grid (part, query, head), one warp each. Shared: q, then the head_dim_v accumulator.
template <quant::TypeId KType, quant::TypeId VType>
__global__ void __launch_bounds__(kWarpLanes)
    attention_parts(const uint8_t* q, size_t q_stride, const uint8_t* k_cache, size_t k_stride,
                    const uint8_t* v_cache, size_t v_stride, const int32_t* args, AttentionShape s, size_t q_bytes,
                    float* scratch) {
    extern __shared__ __align__(16) uint8_t shared[];
    const int lane = static_cast<int>(threadIdx.x);
    const int64_t part = blockIdx.x, i = blockIdx.y, h = blockIdx.z, hk = h / s.group;
    const int64_t pos = args[kAttentionQueryWords * i];
    const int32_t* table = args + args[kAttentionQueryWords * i + 1];
    const int64_t lo = max(first_visible(pos, s.window), part * kAttentionSplit);
    const int64_t hi = part == s.n_parts - 1 ? pos : min(pos, (part + 1) * kAttentionSplit - 1);
    if (lo > hi) return;  // this part holds none of the query's positions; the merge skips it

    // q of this head in K's dot type.
    const float* qh = reinterpret_cast<const float*>(q + i * q_stride) + h * s.head_dim;
    void* qd = shared;
    if constexpr (KType == quant::TypeId::Q8_0) {
        for (int64_t b = lane; b < s.head_dim / kQK; b += kWarpLanes) {
            quantize_activation(qh + b * kQK, static_cast<BlockQ8_0*>(qd)[b]);
        }
    } else {
        for (int64_t d = lane; d < s.head_dim; d += kWarpLanes) {
            static_cast<float*>(qd)[d] = KType == quant::TypeId::F16 ? round_to_f16(qh[d]) : qh[d];
        }
    }
    float* acc = reinterpret_cast<float*>(shared + q_bytes);
    for (int64_t d = lane; d < s.head_dim_v; d += kWarpLanes) acc[d] = 0.0f;
    __syncwarp();

    constexpr bool kF16Acc = VType == quant::TypeId::F16;
    SoftmaxState st;
    for (int64_t p = lo; p <= hi; ++p) {
        const int64_t row = static_cast<int64_t>(table[p / s.block_size]) * s.block_size + p % s.block_size;
        const uint8_t* kh = k_cache + row * k_stride + hk * s.k_head_bytes;
        const uint8_t* vh = v_cache + row * v_stride + hk * s.v_head_bytes;
        const float score = mul_rn(qk_dot<KType>(qd, kh, s.head_dim, lane), s.scale);
        const bool moved = score > st.max;
        const SoftmaxStep step = softmax_add(st, score);
        for (int64_t d = lane; d < s.head_dim_v; d += kWarpLanes) {
            acc[d] = softmax_accumulate(acc[d], v_element<VType>(vh, d), step, moved, kF16Acc);
        }
    }

    float* out = scratch + ((i * s.n_head + h) * s.n_parts + part) * part_floats(s);
    if (lane == 0) {
        out[0] = st.max;
        out[1] = st.sum;
    }
    for (int64_t d = lane; d < s.head_dim_v; d += kWarpLanes) out[2 + d] = acc[d];
}

// grid (query, head), one warp each: merges the query's non-empty parts in ascending order.
__global__ void __launch_bounds__(kWarpLanes)
    attention_merge(const int32_t* args, AttentionShape s, const float* sinks, const float* scratch, uint8_t* out,
                    size_t out_stride) {
    const int lane = static_cast<int>(threadIdx.x);
    const int64_t i = blockIdx.x, h = blockIdx.y;
    const int64_t pos = args[kAttentionQueryWords * i];
    const int64_t first_part = part_of(first_visible(pos, s.window), s.n_parts), last_part = part_of(pos, s.n_parts);
    const float* parts = scratch + (i * s.n_head + h) * s.n_parts * part_floats(s);
    float* o = reinterpret_cast<float*>(out + i * out_stride) + h * s.head_dim_v;

    const float* p0 = parts + first_part * part_floats(s);
    SoftmaxState st{p0[0], p0[1]};
    // Each lane merges its own elements d = lane + 32 j; the states are merged identically in
    // every lane, so the factors agree.
    for (int64_t d = lane; d < s.head_dim_v; d += kWarpLanes) {
        SoftmaxState a = st;
        float acc = p0[2 + d];
        for (int64_t part = first_part + 1; part <= last_part; ++part) {
            const float* pj = parts + part * part_floats(s);
            const MergeFactors f = softmax_merge(a, SoftmaxState{pj[0], pj[1]});
            acc = merge_accumulator(acc, pj[2 + d], f);
        }
        if (sinks) acc = mul_rn(acc, softmax_add(a, sinks[h]).rescale);
        o[d] = mul_rn(acc, div_rn(1.0f, a.sum));
    }
}

template <quant::TypeId KType, quant::TypeId VType>
void launch_typed(cudaStream_t stream, const DevTensor& q, const DevTensor& k_cache, const DevTensor& v_cache,
                  const int32_t* args, const AttentionShape& s, const float* sinks, const DevTensor& out,
                  float* scratch) {
    const int64_t n_queries = q.ne1;
    const size_t q_bytes = q_shared_bytes(KType, s.head_dim);
    const size_t shared = q_bytes + static_cast<size_t>(s.head_dim_v) * sizeof(float);
    const dim3 parts_grid(static_cast<unsigned>(s.n_parts), static_cast<unsigned>(n_queries),
                          static_cast<unsigned>(s.n_head));
    attention_parts<KType, VType><<<parts_grid, kWarpLanes, shared, stream>>>(
        q.data, q.row_stride, k_cache.data, k_cache.row_stride, v_cache.data, v_cache.row_stride, args, s, q_bytes,
        scratch);
    const dim3 merge_grid(static_cast<unsigned>(n_queries), static_cast<unsigned>(s.n_head));
    attention_merge<<<merge_grid, kWarpLanes, 0, stream>>>(args, s, sinks, scratch, out.data, out.row_stride);
}

template <quant::TypeId KType>
void launch_for_v(cudaStream_t stream, const DevTensor& q, const DevTensor& k_cache, const DevTensor& v_cache,
                  const int32_t* args, const AttentionShape& s, const float* sinks, const DevTensor& out,
                  float* scratch) {
    using quant::TypeId;
    switch (v_cache.type) {
        case TypeId::F32:
            launch_typed<KType, TypeId::F32>(stream, q, k_cache, v_cache, args, s, sinks, out, scratch);
            break;
        case TypeId::F16:
            launch_typed<KType, TypeId::F16>(stream, q, k_cache, v_cache, args, s, sinks, out, scratch);
            break;
        case TypeId::Q8_0:
            launch_typed<KType, TypeId::Q8_0>(stream, q, k_cache, v_cache, args, s, sinks, out, scratch);
            break;
        default: break;  // refused by attention_supported
    }
}

bool cache_type_supported(quant::TypeId t) {
    return t == quant::TypeId::F32 || t == quant::TypeId::F16 || t == quant::TypeId::Q8_0;
}

}  // namespace

bool attention_supported(quant::TypeId k_type, quant::TypeId v_type) {
    return cache_type_supported(k_type) && cache_type_supported(v_type);
}

// cache_rows: the rows of the K (and V) cache, as launch_attention sees them (k_cache.ne1).
size_t attention_scratch_bytes(int64_t n_queries, const AttentionParams& p, int64_t cache_rows) {
    return static_cast<size_t>(n_queries) * static_cast<size_t>(p.n_head) * static_cast<size_t>(parts_for(cache_rows)) *
           static_cast<size_t>(p.head_dim_v + 2) * sizeof(float);
}

void launch_attention(cudaStream_t stream, const DevTensor& q, const DevTensor& k_cache, const DevTensor& v_cache,
                      int64_t block_size, const int32_t* args, const AttentionParams& p, const float* sinks,
                      const DevTensor& out, void* scratch) {
    if (q.ne1 <= 0 || !attention_supported(k_cache.type, v_cache.type)) return;
    AttentionShape s;
    s.n_head = p.n_head;
    s.group = p.n_head / p.n_head_kv;
    s.head_dim = p.head_dim;
    s.head_dim_v = p.head_dim_v;
    s.scale = p.scale;
    s.window = p.window;
    s.block_size = block_size;
    s.n_parts = parts_for(k_cache.ne1);
    s.k_head_bytes = quant::row_bytes(k_cache.type, p.head_dim);
    s.v_head_bytes = quant::row_bytes(v_cache.type, p.head_dim_v);
    auto* parts = static_cast<float*>(scratch);
    using quant::TypeId;
    switch (k_cache.type) {
        case TypeId::F32: launch_for_v<TypeId::F32>(stream, q, k_cache, v_cache, args, s, sinks, out, parts); break;
        case TypeId::F16: launch_for_v<TypeId::F16>(stream, q, k_cache, v_cache, args, s, sinks, out, parts); break;
        case TypeId::Q8_0: launch_for_v<TypeId::Q8_0>(stream, q, k_cache, v_cache, args, s, sinks, out, parts); break;
        default: break;
    }
}

}  // namespace deskside::backends::cuda
