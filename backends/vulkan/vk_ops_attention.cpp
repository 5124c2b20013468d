// Vulkan attention over the paged KV cache (shaders/attention.comp). Positions and block tables
// are the step's argument tensor (backends/backend.h, kAttentionQueryWords), bound as it is.
#include <string>
#include <vector>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_ops_common.h"
#include "backends/vulkan/vk_shaders.h"

namespace deskside::backends::vulkan {
namespace {

constexpr int64_t kMaxHeadDim = 256;  // attention.comp: 64 threads x 4 dimensions each

struct AttentionPush {
    uint32_t n_queries, n_head, n_head_kv, head_dim, head_dim_v, block_size, window;
    float scale;
    uint32_t q_offset, q_stride, k_offset, k_stride, v_offset, v_stride, o_offset, o_stride;
    uint32_t first_query;  // index of this dispatch's first query in the argument buffer
    uint32_t args_offset;  // element of the arguments' first word in their binding
    uint32_t has_sinks, sinks_offset;
};

// The kernel for the cache types; with shaderFloat64, the one that gives the CPU's bits (_exact).
std::string attention_variant(const KvCacheView& kv, bool fp64) {
    const std::string name = "attention_" + std::string(quant::type_info(kv.k.type).name) + "_" +
                             std::string(quant::type_info(kv.v.type).name) + (fp64 ? "_exact" : "");
    for (const ShaderCode& s : all_shaders())
        if (name == s.name) return name;
    throw std::invalid_argument("vulkan attention: no kernel for a " + std::string(quant::type_info(kv.k.type).name) +
                                " K cache with a " + std::string(quant::type_info(kv.v.type).name) +
                                " V cache (supported: any pair of f32, f16 and q8_0)");
}

}  // namespace

void VulkanBackend::attention(const Tensor& q, const KvCacheView& kv, const Tensor& queries, const AttentionParams& p,
                              const Tensor& out) {
    const char* op = "attention";
    require_f32(q, op, "q");
    require_f32(out, op, "out");
    require(q.ne0 == p.n_head * p.head_dim && out.ne0 == p.n_head * p.head_dim_v && out.ne1 == q.ne1, op,
            "q " + shape_of(q) + " / out " + shape_of(out) + " do not match n_head " + std::to_string(p.n_head) +
                " x head_dim " + std::to_string(p.head_dim) + " / head_dim_v " + std::to_string(p.head_dim_v));
    require(p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0, op, "n_head must be a multiple of n_head_kv");
    require(p.head_dim <= kMaxHeadDim && p.head_dim_v <= kMaxHeadDim, op,
            "head dimensions above " + std::to_string(kMaxHeadDim) + " are not supported");
    require(kv.block_size > 0, op, "block_size must be positive");
    require(kv.k.ne0 == p.n_head_kv * p.head_dim && kv.v.ne0 == p.n_head_kv * p.head_dim_v, op,
            "cache rows k " + shape_of(kv.k) + " / v " + shape_of(kv.v) + " do not match n_head_kv x head_dim");
    const std::string variant = attention_variant(kv, caps().fp64);
    if (q.ne1 == 0) return;

    const bool has_sinks = !p.sinks.empty();
    if (has_sinks) {
        require_f32(p.sinks, op, "sinks");
        require(p.sinks.ne0 * p.sinks.ne1 >= p.n_head && (p.sinks.ne1 == 1 || p.sinks.row_stride == p.sinks.row_bytes()),
                op, "sinks must hold n_head = " + std::to_string(p.n_head) + " contiguous values, got " + shape_of(p.sinks));
    }
    const Pipeline& pl = pipeline(variant, 6, sizeof(AttentionPush));
    require(queries.type == quant::TypeId::I32 && queries.ne0 >= kAttentionQueryWords * q.ne1, op,
            "the arguments must be I32 with at least 3 words per query, got " + shape_of(queries));
    const Binding ba = bind_index(queries, 0, queries.ne0, op);
    // The cache of one layer is bound whole (positions are scattered over it).
    const Binding bk = bind(kv.k, Access::Read);
    const Binding bv = bind(kv.v, Access::Read);
    const Binding bs = has_sinks ? bind(p.sinks, Access::Read) : bind(q.rows(0, 1), Access::Read);
    for_row_chunks(*this, q.ne1, {&q, &out}, [&](int64_t first, int64_t n) {
        const Binding bq = bind_rows(q, first, n, Access::Read);
        const Binding bo = bind_rows(out, first, n, Access::Write);
        AttentionPush push{static_cast<uint32_t>(n), static_cast<uint32_t>(p.n_head), static_cast<uint32_t>(p.n_head_kv),
                           static_cast<uint32_t>(p.head_dim), static_cast<uint32_t>(p.head_dim_v),
                           static_cast<uint32_t>(kv.block_size), static_cast<uint32_t>(p.window), p.scale,
                           words(bq.skip_bytes), static_cast<uint32_t>(q.row_stride / 4), bk.skip_bytes,
                           static_cast<uint32_t>(kv.k.row_stride), bv.skip_bytes, static_cast<uint32_t>(kv.v.row_stride),
                           words(bo.skip_bytes), static_cast<uint32_t>(out.row_stride / 4),
                           static_cast<uint32_t>(first), words(ba.skip_bytes), has_sinks ? 1u : 0u,
                           words(bs.skip_bytes)};
        dispatch(pl, {bq, bk, bv, bo, ba, bs}, &push, groups(static_cast<uint64_t>(n) * p.n_head));
    });
}

}  // namespace deskside::backends::vulkan
