// CPU causal attention over the paged KV cache, one task per (query row, head).
//
// The arithmetic follows llama.cpp's CPU flash attention, because its logits are our reference
// and a one-ulp difference here changes F16 roundings downstream: q . k is the K cache type's
// vec_dot after rounding q to that type's dot type (F16 for an F16 cache); softmax is online, in
// position order (ref: Milakov & Gimelshein, arXiv:1805.02867); with an F16 V cache the weighted
// sum of V is accumulated in F16, otherwise in F32.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dot_kernels.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace deskside::backends::cpu {

void CpuBackend::attention(const Tensor& q, const KvCacheView& kv, std::span<const AttentionQuery> queries,
                           const AttentionParams& p, const Tensor& out) {
    assert(q.type == quant::TypeId::F32 && q.ne0 == p.n_head * p.head_dim);
    assert(out.type == quant::TypeId::F32 && out.ne0 == p.n_head * p.head_dim_v);
    assert(static_cast<int64_t>(queries.size()) == q.ne1 && out.ne1 == q.ne1);
    assert(p.n_head % p.n_head_kv == 0);
    const quant::QuantTraits* kt = quant::quant_traits(kv.k.type);
    const quant::QuantTraits* vt = quant::quant_traits(kv.v.type);
    if (!kt || !vt) throw std::invalid_argument("cpu attention: unsupported KV cache type");
    const quant::QuantTraits* qt = quant::quant_traits(kt->vec_dot_type);
    if (!qt || (kt->vec_dot_type != quant::TypeId::F32 && !qt->from_float))
        throw std::invalid_argument("cpu attention: no quantizer for the K cache's dot type");

    const size_t k_head_bytes = quant::row_bytes(kv.k.type, p.head_dim);
    const size_t v_head_bytes = quant::row_bytes(kv.v.type, p.head_dim_v);
    const int64_t group = p.n_head / p.n_head_kv;
    for (const AttentionQuery& aq : queries) {
        if (static_cast<int64_t>(aq.blocks.size()) * kv.block_size <= aq.pos)
            throw std::out_of_range("cpu attention: position " + std::to_string(aq.pos) + " beyond the block table");
    }
    const quant::VecDotFn k_dot = best_vec_dot(kv.k.type);
    const bool f16_accumulator = kv.v.type == quant::TypeId::F16;
    const auto round = [f16_accumulator](float v) { return f16_accumulator ? quant::fp16_to_fp32(quant::fp32_to_fp16(v)) : v; };
    // llama.cpp fuses the F16 multiply-add over whole 32-element groups only.
    const int64_t fused = f16_accumulator ? p.head_dim_v / 32 * 32 : p.head_dim_v;
    // Per thread: q in the dot type (bytes, counted in floats, with room for block headers), one
    // V head as F32, the accumulator.
    const int64_t q_floats = p.head_dim + 16;
    const int64_t per_thread = q_floats + 2 * p.head_dim_v;
    const size_t needed = static_cast<size_t>(per_thread) * pool_.size();
    if (attention_scratch_.size() < needed) attention_scratch_.resize(needed);

    int64_t max_visible = 1;
    for (const AttentionQuery& aq : queries) max_visible = std::max<int64_t>(max_visible, aq.pos + 1);
    if (p.window > 0) max_visible = std::min(max_visible, p.window);
    for_each(q.ne1 * p.n_head, max_visible * (p.head_dim + p.head_dim_v), [&](int64_t task, int thread) {
        const int64_t t = task / p.n_head, h = task % p.n_head, hk = h / group;
        const AttentionQuery& aq = queries[t];
        float* qq = attention_scratch_.data() + thread * per_thread;
        float* vrow = qq + q_floats;
        float* acc = vrow + p.head_dim_v;

        const float* qh = host_f32_row(q, t) + h * p.head_dim;
        const void* qdot = qh;
        if (kt->vec_dot_type != quant::TypeId::F32) {
            qt->from_float(qh, qq, p.head_dim);
            qdot = qq;
        }
        const int64_t first = p.window > 0 ? std::max<int64_t>(0, aq.pos - p.window + 1) : 0;
        const auto cache_row = [&](int64_t pos) { return aq.blocks[pos / kv.block_size] * kv.block_size + pos % kv.block_size; };

        std::fill(acc, acc + p.head_dim_v, 0.0f);
        float max_score = -std::numeric_limits<float>::infinity();
        float sum = 0;
        for (int64_t pos = first; pos <= aq.pos; ++pos) {
            const uint8_t* kh = host_row(kv.k, cache_row(pos)) + hk * k_head_bytes;
            const float s = k_dot(p.head_dim, kh, qdot) * p.scale;
            float ms = 1.0f, vs = 1.0f;  // rescale of the running sums, weight of this V
            if (s > max_score) {
                ms = std::exp(max_score - s);
                max_score = s;
                for (int64_t d = 0; d < p.head_dim_v; ++d) acc[d] = round(acc[d] * ms);
            } else {
                vs = std::exp(s - max_score);
            }
            vt->to_float(host_row(kv.v, cache_row(pos)) + hk * v_head_bytes, vrow, p.head_dim_v);
            for (int64_t d = 0; d < fused; ++d) acc[d] = round(std::fma(vrow[d], vs, acc[d]));
            for (int64_t d = fused; d < p.head_dim_v; ++d) acc[d] = round(acc[d] + vrow[d] * vs);
            sum = sum * ms + vs;
        }
        const float inv = 1.0f / sum;
        float* o = host_f32_row(out, t) + h * p.head_dim_v;
        for (int64_t d = 0; d < p.head_dim_v; ++d) o[d] = acc[d] * inv;
    });
}

}  // namespace deskside::backends::cpu
