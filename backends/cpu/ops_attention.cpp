// CPU causal attention over the paged KV cache, split across the thread pool in tasks of one
// query row and the query heads that share a KV head (grouped-query attention): each K and V row
// of the cache is read, and V widened to F32, once for all of them. Every head still runs its own
// loop in position order with its own max, sum and accumulator, so the bits do not depend on how
// heads are grouped into tasks.
//
// The arithmetic follows llama.cpp's CPU flash attention for one query row (the path its
// reference runs took: prompts shorter than its 64-row tile, then one token per step), because
// its logits are our reference and a one-ulp difference here changes F16 roundings downstream:
// q . k is the K cache type's dot after rounding q to that type's dot type (F16 for an F16 cache,
// in the reference machine's summation order, see ops_attention_kernels.h); softmax is online,
// in position order (ref: Milakov & Gimelshein, arXiv:1805.02867); with an F16 V cache the
// weighted sum of V is accumulated in F16, otherwise in F32. Attention sinks (AttentionParams::
// sinks) come after the last position, as ggml's flash attention takes them: the sink logit joins
// the running max (the accumulator, already widened to F32, rescaled in F32 when it is larger)
// and adds exp(sink - max) to the sum, without a value.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/convert_f16.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dot_kernels.h"
#include "backends/cpu/ops_attention_kernels.h"
#include "quant/activation_quant.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace deskside::backends::cpu {

namespace {

float round_f16(float v) {
    return quant::fp16_to_fp32(quant::fp32_to_fp16(v));
}

}  // namespace

float attn_dot_f16(int64_t n, const uint16_t* k, const uint16_t* q) {
    constexpr int kLanes = 16, kAcc = 4;
    const int64_t np = n / kAttnF16Step * kAttnF16Step;
    double sum = 0;
    if (np > 0) {
        float acc[kAcc][kLanes] = {};
        for (int64_t i = 0; i < np; i += kAttnF16Step)
            for (int j = 0; j < kAcc; ++j)
                for (int l = 0; l < kLanes; ++l) {
                    const int64_t e = i + j * kLanes + l;
                    acc[j][l] = std::fma(quant::fp16_to_fp32(k[e]), quant::fp16_to_fp32(q[e]), acc[j][l]);
                }
        for (int l = 0; l < kLanes; ++l) {
            acc[0][l] += acc[2][l];
            acc[1][l] += acc[3][l];
            acc[0][l] += acc[1][l];
        }
        float h[8], g[4];
        for (int l = 0; l < 8; ++l) h[l] = acc[0][l + 8] + acc[0][l];
        for (int l = 0; l < 4; ++l) g[l] = h[l + 4] + h[l];
        sum = (g[0] + g[2]) + (g[1] + g[3]);
    }
    for (int64_t i = np; i < n; ++i) sum += static_cast<double>(quant::fp16_to_fp32(k[i]) * quant::fp16_to_fp32(q[i]));
    return static_cast<float>(sum);
}

void attn_scale(float* acc, int64_t n, float scale, bool f16) {
    for (int64_t d = 0; d < n; ++d) acc[d] = f16 ? round_f16(acc[d] * scale) : acc[d] * scale;
}

void attn_accumulate(float* acc, const float* v, float w, int64_t n, bool f16) {
    for (int64_t d = 0; d < n; ++d) {
        const float r = std::fma(v[d], w, acc[d]);
        acc[d] = f16 ? round_f16(r) : r;
    }
}

void attn_f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
    for (int64_t d = 0; d < n; ++d) dst[d] = quant::fp16_to_fp32(src[d]);
}

AttnKernels attention_kernels(CpuIsa isa) {
    if (isa == CpuIsa::Scalar) return {attn_dot_f16, attn_scale, attn_accumulate, attn_f16_to_f32};
    return {attn_dot_f16_avx2, attn_scale_avx2, attn_accumulate_avx2, attn_f16_to_f32_avx2};
}

namespace {

// One query row of an attention call, read out of the argument tensor (kAttentionQueryWords).
struct AttentionQuery {
    int32_t pos = 0;
    std::span<const int32_t> blocks;
};

// The queries of `args`, each checked: the table lies inside the tensor, covers pos, and names
// blocks inside the cache.
std::vector<AttentionQuery> read_attention_args(const Tensor& args, int64_t n_queries, const KvCacheView& kv) {
    const std::span<const int32_t> words = host_i32(args, args.ne0, "attention");
    if (static_cast<int64_t>(words.size()) < kAttentionQueryWords * n_queries)
        throw std::invalid_argument("cpu attention: " + std::to_string(words.size()) + " argument words for " +
                                    std::to_string(n_queries) + " queries");
    std::vector<AttentionQuery> out(static_cast<size_t>(n_queries));
    for (int64_t i = 0; i < n_queries; ++i) {
        const int32_t pos = words[kAttentionQueryWords * i], table = words[kAttentionQueryWords * i + 1],
                      n_blocks = words[kAttentionQueryWords * i + 2];
        if (pos < 0 || table < 0 || n_blocks < 0 || static_cast<size_t>(table) + n_blocks > words.size() ||
            static_cast<int64_t>(n_blocks) * kv.block_size <= pos)
            throw std::out_of_range("cpu attention: query " + std::to_string(i) + " (position " + std::to_string(pos) +
                                    ") has a block table outside the arguments or shorter than its position");
        out[i] = {pos, words.subspan(static_cast<size_t>(table), static_cast<size_t>(n_blocks))};
        for (int32_t b : out[i].blocks) {
            if (b < 0 || (static_cast<int64_t>(b) + 1) * kv.block_size > std::min(kv.k.ne1, kv.v.ne1))
                throw std::out_of_range("cpu attention: block " + std::to_string(b) + " outside the cache");
        }
    }
    return out;
}

}  // namespace

void CpuBackend::attention(const Tensor& q, const KvCacheView& kv, const Tensor& query_args, const AttentionParams& p,
                           const Tensor& out) {
    assert(q.type == quant::TypeId::F32 && q.ne0 == p.n_head * p.head_dim);
    assert(out.type == quant::TypeId::F32 && out.ne0 == p.n_head * p.head_dim_v);
    assert(out.ne1 == q.ne1);
    const std::vector<AttentionQuery> queries = read_attention_args(query_args, q.ne1, kv);
    assert(p.n_head % p.n_head_kv == 0);
    const quant::QuantTraits* kt = quant::quant_traits(kv.k.type);
    const quant::QuantTraits* vt = quant::quant_traits(kv.v.type);
    if (!kt || !vt) throw std::invalid_argument("cpu attention: unsupported KV cache type");
    // q goes into K's dot type through the quantizer llama.cpp's x86 build uses for activations
    // (for a Q8_0 cache: 127 / amax, round half to even), as its flash attention does.
    // For an F16 cache that is the F16C row converter (the same bits as the scalar one).
    const quant::FromFloatFn q_to_dot_type = kt->vec_dot_type == quant::TypeId::F32 ? nullptr
                                             : kt->vec_dot_type == quant::TypeId::F16
                                                 ? best_f16_converter()
                                                 : quant::activation_from_float(kt->vec_dot_type);
    if (kt->vec_dot_type != quant::TypeId::F32 && !q_to_dot_type)
        throw std::invalid_argument("cpu attention: no quantizer for the K cache's dot type");

    const size_t k_head_bytes = quant::row_bytes(kv.k.type, p.head_dim);
    const size_t v_head_bytes = quant::row_bytes(kv.v.type, p.head_dim_v);
    const int64_t group = p.n_head / p.n_head_kv;
    const float* sinks = nullptr;
    if (!p.sinks.empty()) {
        if (p.sinks.type != quant::TypeId::F32 || p.sinks.ne0 * p.sinks.ne1 < p.n_head ||
            (p.sinks.ne1 > 1 && p.sinks.row_stride != p.sinks.row_bytes()))
            throw std::invalid_argument(
                "cpu attention: sinks must be a contiguous F32 tensor of n_head = " + std::to_string(p.n_head) +
                " values, got [" + std::to_string(p.sinks.ne0) + ", " + std::to_string(p.sinks.ne1) + "] " +
                std::string(quant::type_info(p.sinks.type).name));
        sinks = host_f32_row(p.sinks);
    }
    const bool f16_k = kv.k.type == quant::TypeId::F16;
    const quant::VecDotFn k_dot = best_vec_dot(kv.k.type);
    const AttnKernels loops = attention_kernels(selected_isa());
    const auto dot_f16 = loops.dot_f16;
    const auto scale_acc = loops.scale;
    const auto accumulate = loops.accumulate;
    const auto widen_f16 = loops.widen_f16;
    const bool f16_acc = kv.v.type == quant::TypeId::F16;
    // Heads per task: the whole group unless that leaves threads without work (one decoding
    // sequence of a model with one KV head); then the group is halved while it divides evenly.
    int64_t heads_per_task = group;
    const int64_t min_tasks = 2 * static_cast<int64_t>(pool_.size());
    while (heads_per_task % 2 == 0 && q.ne1 * (p.n_head / heads_per_task) < min_tasks) heads_per_task /= 2;
    const int64_t tasks_per_row = p.n_head / heads_per_task;
    // Per thread: one V row as F32, then per head of a task: q in the dot type (bytes, counted in
    // floats, with room for block headers), the accumulator, the running max and sum.
    const int64_t q_floats = p.head_dim + 16;
    const int64_t per_head = q_floats + p.head_dim_v + 2;
    const int64_t per_thread = p.head_dim_v + heads_per_task * per_head;
    const size_t needed = static_cast<size_t>(per_thread) * pool_.size();
    if (attention_scratch_.size() < needed) attention_scratch_.resize(needed);

    int64_t max_visible = 1;
    for (const AttentionQuery& aq : queries) max_visible = std::max<int64_t>(max_visible, aq.pos + 1);
    if (p.window > 0) max_visible = std::min(max_visible, p.window);
    const int64_t cost = max_visible * (p.head_dim + p.head_dim_v) * heads_per_task;
    for_each(q.ne1 * tasks_per_row, cost, [&](int64_t task, int thread) {
        const int64_t t = task / tasks_per_row, h0 = task % tasks_per_row * heads_per_task, hk = h0 / group;
        const AttentionQuery& aq = queries[t];
        float* vrow = attention_scratch_.data() + thread * per_thread;
        float* head_scratch = vrow + p.head_dim_v;
        const auto qq = [&](int64_t j) { return head_scratch + j * per_head; };
        const auto acc = [&](int64_t j) { return qq(j) + q_floats; };
        const auto max_score = [&](int64_t j) -> float& { return acc(j)[p.head_dim_v]; };
        const auto sum = [&](int64_t j) -> float& { return acc(j)[p.head_dim_v + 1]; };

        const float* q_row = host_f32_row(q, t);
        for (int64_t j = 0; j < heads_per_task; ++j) {
            const float* qh = q_row + (h0 + j) * p.head_dim;
            if (q_to_dot_type)
                q_to_dot_type(qh, qq(j), p.head_dim);
            else
                std::copy(qh, qh + p.head_dim, qq(j));
            std::fill(acc(j), acc(j) + p.head_dim_v, 0.0f);
            max_score(j) = -std::numeric_limits<float>::infinity();
            sum(j) = 0;
        }
        const int64_t first = p.window > 0 ? std::max<int64_t>(0, aq.pos - p.window + 1) : 0;
        const auto cache_row = [&](int64_t pos) {
            return aq.blocks[pos / kv.block_size] * kv.block_size + pos % kv.block_size;
        };

        for (int64_t pos = first; pos <= aq.pos; ++pos) {
            const int64_t row = cache_row(pos);
            const uint8_t* kh = host_row(kv.k, row) + hk * k_head_bytes;
            const uint8_t* vh = host_row(kv.v, row) + hk * v_head_bytes;
            if (f16_acc)
                widen_f16(reinterpret_cast<const uint16_t*>(vh), vrow, p.head_dim_v);
            else
                vt->to_float(vh, vrow, p.head_dim_v);
            for (int64_t j = 0; j < heads_per_task; ++j) {
                const float dot = f16_k ? dot_f16(p.head_dim, reinterpret_cast<const uint16_t*>(kh),
                                                  reinterpret_cast<const uint16_t*>(qq(j)))
                                        : k_dot(p.head_dim, kh, qq(j));
                const float s = dot * p.scale;
                float ms = 1.0f, vs = 1.0f;  // rescale of the running sums, weight of this V
                if (s > max_score(j)) {
                    ms = std::exp(max_score(j) - s);
                    max_score(j) = s;
                    scale_acc(acc(j), p.head_dim_v, ms, f16_acc);
                } else {
                    vs = std::exp(s - max_score(j));
                }
                accumulate(acc(j), vrow, vs, p.head_dim_v, f16_acc);
                sum(j) = sum(j) * ms + vs;
            }
        }
        for (int64_t j = 0; j < heads_per_task; ++j) {
            if (sinks) {
                const float s = sinks[h0 + j];
                float ms = 1.0f, vs = 1.0f;
                if (s > max_score(j)) {
                    ms = std::exp(max_score(j) - s);
                    scale_acc(acc(j), p.head_dim_v, ms, false);
                } else {
                    vs = std::exp(s - max_score(j));
                }
                sum(j) = sum(j) * ms + vs;
            }
            const float inv = 1.0f / sum(j);
            float* o = host_f32_row(out, t) + (h0 + j) * p.head_dim_v;
            for (int64_t d = 0; d < p.head_dim_v; ++d) o[d] = acc(j)[d] * inv;
        }
    });
}

}  // namespace deskside::backends::cpu
