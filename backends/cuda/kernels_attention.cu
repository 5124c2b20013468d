// Causal attention over the paged KV cache on the GPU (kernels.h), with the CPU backend's bits at
// its AVX2 level (backends/cpu/ops_attention.cpp): query head h reads KV head h / (n_head /
// n_head_kv); query i at position pos sees positions max(0, pos - window + 1) ..= pos through its
// block table; score = (q . k) * scale, with q first rounded to K's dot type (F16 for an F16 cache,
// Q8_0 with the x86 activation quantizer for a Q8_0 cache) and the dot summed in the CPU's order;
// online softmax in position order with glibc's expf; the V accumulator rounded to F16 after each
// step when V is F16; attention sinks after the last position. The arithmetic is
// device/attention_math.cuh, checked on the host against the CPU (tests/backends/
// test_cuda_exact_ops.cpp); this file only schedules it.
//
// One CTA of kThreads per (query, head), walking the query's positions in chunks of kThreads:
// 1. thread j scores position chunk + j alone (one whole dot per thread, the CPU's order);
// 2. thread j takes the prefix max of the chunk's scores before it (exact in any order) and
//    computes its position's softmax step, exp included;
// 3. every thread walks the chunk's steps in order: the sum chain (the same in every thread), and
//    the accumulator elements it owns (d = t, t + kThreads, ...), one fma per position.
// The context is never split, so the bits are those of one sequential chain per (query, head),
// whatever the batch or the context length (batch invariance).
#include <cuda_runtime.h>

#include "backends/cuda/device/attention_math.cuh"
#include "backends/cuda/device/quantize_activation.cuh"
#include "backends/cuda/kernels.h"

namespace deskside::backends::cuda {
namespace {

using namespace device;

constexpr int kThreads = 128;

struct AttentionShape {
    int64_t n_head, group, head_dim, head_dim_v;
    float scale;
    int64_t window;
    int64_t block_size;
    size_t k_head_bytes, v_head_bytes;
};

// Bytes of shared memory for q in K's dot type, rounded up to 16.
size_t q_shared_bytes(quant::TypeId k_type, int64_t head_dim) {
    const size_t bytes = k_type == quant::TypeId::Q8_0 ? quant::row_bytes(quant::TypeId::Q8_0, head_dim)
                                                       : static_cast<size_t>(head_dim) * sizeof(float);
    return (bytes + 15) / 16 * 16;
}

// grid (query, head). Dynamic shared memory: q, then the head_dim_v accumulator.
template <quant::TypeId KType, quant::TypeId VType>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(const uint8_t* q, size_t q_stride, const uint8_t* k_cache, size_t k_stride,
                     const uint8_t* v_cache, size_t v_stride, const int32_t* args, AttentionShape s, size_t q_bytes,
                     const float* sinks, uint8_t* out, size_t out_stride) {
    extern __shared__ __align__(16) uint8_t shared[];
    // The chunk's scores and steps (SoftmaxStep's fields apart: __shared__ takes no initializers).
    __shared__ float scores[kThreads], rescale[kThreads], weight[kThreads];
    __shared__ bool moved[kThreads];
    const int t = static_cast<int>(threadIdx.x);
    const int64_t i = blockIdx.x, h = blockIdx.y, hk = h / s.group;
    const int64_t pos = args[kAttentionQueryWords * i];
    const int32_t* table = args + args[kAttentionQueryWords * i + 1];
    const auto cache_row = [&](int64_t p) {
        return static_cast<int64_t>(table[p / s.block_size]) * s.block_size + p % s.block_size;
    };

    // q of this head in K's dot type.
    const float* qh = reinterpret_cast<const float*>(q + i * q_stride) + h * s.head_dim;
    void* qd = shared;
    if constexpr (KType == quant::TypeId::Q8_0) {
        for (int64_t b = t; b < s.head_dim / kQK; b += kThreads)
            quantize_activation(qh + b * kQK, static_cast<BlockQ8_0*>(qd)[b]);
    } else {
        for (int64_t d = t; d < s.head_dim; d += kThreads)
            static_cast<float*>(qd)[d] = KType == quant::TypeId::F16 ? round_to_f16(qh[d]) : qh[d];
    }
    float* acc = reinterpret_cast<float*>(shared + q_bytes);
    for (int64_t d = t; d < s.head_dim_v; d += kThreads) acc[d] = 0.0f;
    __syncthreads();

    constexpr bool kF16Acc = VType == quant::TypeId::F16;
    float run_max = -INFINITY, sum = 0.0f;
    const int64_t first = s.window > 0 ? max(static_cast<int64_t>(0), pos - s.window + 1) : 0;
    for (int64_t chunk = first; chunk <= pos; chunk += kThreads) {
        const int n = static_cast<int>(min(static_cast<int64_t>(kThreads), pos - chunk + 1));
        if (t < n) {
            const uint8_t* kh = k_cache + cache_row(chunk + t) * k_stride + hk * s.k_head_bytes;
            scores[t] = mul_rn(attn_qk<KType>(qd, kh, s.head_dim), s.scale);
        }
        __syncthreads();
        if (t < n) {
            float max_before = run_max;
            for (int j = 0; j < t; ++j) max_before = running_max(max_before, scores[j]);
            const SoftmaxStep step = softmax_step(max_before, scores[t]);
            rescale[t] = step.rescale;
            weight[t] = step.weight;
            moved[t] = step.moved;
        }
        __syncthreads();
        for (int j = 0; j < n; ++j) {
            const SoftmaxStep step{rescale[j], weight[j], moved[j]};
            run_max = running_max(run_max, scores[j]);
            sum = softmax_sum(sum, step);
            const uint8_t* vh = v_cache + cache_row(chunk + j) * v_stride + hk * s.v_head_bytes;
            for (int64_t d = t; d < s.head_dim_v; d += kThreads)
                acc[d] = softmax_accumulate(acc[d], attn_v_element<VType>(vh, d), step, kF16Acc);
        }
        __syncthreads();  // scores and steps are rewritten by the next chunk
    }

    float* o = reinterpret_cast<float*>(out + i * out_stride) + h * s.head_dim_v;
    SoftmaxStep sink;
    if (sinks) {
        sink = softmax_step(run_max, sinks[h]);
        sum = softmax_sum(sum, sink);
    }
    for (int64_t d = t; d < s.head_dim_v; d += kThreads) o[d] = softmax_output(sink_accumulate(acc[d], sink), sum);
}

template <quant::TypeId KType, quant::TypeId VType>
void launch_typed(cudaStream_t stream, const DevTensor& q, const DevTensor& k_cache, const DevTensor& v_cache,
                  const int32_t* args, const AttentionShape& s, const float* sinks, const DevTensor& out) {
    const size_t q_bytes = q_shared_bytes(KType, s.head_dim);
    const size_t shared = q_bytes + static_cast<size_t>(s.head_dim_v) * sizeof(float);
    const dim3 grid(static_cast<unsigned>(q.ne1), static_cast<unsigned>(s.n_head));
    attention_kernel<KType, VType><<<grid, kThreads, shared, stream>>>(
        q.data, q.row_stride, k_cache.data, k_cache.row_stride, v_cache.data, v_cache.row_stride, args, s, q_bytes,
        sinks, out.data, out.row_stride);
}

template <quant::TypeId KType>
void launch_for_v(cudaStream_t stream, const DevTensor& q, const DevTensor& k_cache, const DevTensor& v_cache,
                  const int32_t* args, const AttentionShape& s, const float* sinks, const DevTensor& out) {
    using quant::TypeId;
    switch (v_cache.type) {
        case TypeId::F32: launch_typed<KType, TypeId::F32>(stream, q, k_cache, v_cache, args, s, sinks, out); break;
        case TypeId::F16: launch_typed<KType, TypeId::F16>(stream, q, k_cache, v_cache, args, s, sinks, out); break;
        case TypeId::Q8_0: launch_typed<KType, TypeId::Q8_0>(stream, q, k_cache, v_cache, args, s, sinks, out); break;
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

void launch_attention(cudaStream_t stream, const DevTensor& q, const DevTensor& k_cache, const DevTensor& v_cache,
                      int64_t block_size, const int32_t* args, const AttentionParams& p, const float* sinks,
                      const DevTensor& out) {
    if (q.ne1 <= 0 || !attention_supported(k_cache.type, v_cache.type)) return;
    AttentionShape s;
    s.n_head = p.n_head;
    s.group = p.n_head / p.n_head_kv;
    s.head_dim = p.head_dim;
    s.head_dim_v = p.head_dim_v;
    s.scale = p.scale;
    s.window = p.window;
    s.block_size = block_size;
    s.k_head_bytes = quant::row_bytes(k_cache.type, p.head_dim);
    s.v_head_bytes = quant::row_bytes(v_cache.type, p.head_dim_v);
    using quant::TypeId;
    switch (k_cache.type) {
        case TypeId::F32: launch_for_v<TypeId::F32>(stream, q, k_cache, v_cache, args, s, sinks, out); break;
        case TypeId::F16: launch_for_v<TypeId::F16>(stream, q, k_cache, v_cache, args, s, sinks, out); break;
        case TypeId::Q8_0: launch_for_v<TypeId::Q8_0>(stream, q, k_cache, v_cache, args, s, sinks, out); break;
        default: break;
    }
}

}  // namespace deskside::backends::cuda
