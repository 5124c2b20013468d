// Vulkan mixture-of-experts ops: moe_route, add_id, moe_combine and swiglu_oai (shaders/moe.comp); matmul_id
// is vk_matmul.cpp's. The router, add_id and moe_combine bind their tensors whole (a step's activations, far
// below any device's maxStorageBufferRange); swiglu_oai goes by row ranges as the element-wise ops do. Expert
// ids live on the device and are not checked on the host: an id outside [0, n_expert) makes add_id's row NaN
// and leaves matmul_id's row unwritten.
#include <string>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_matmul.h"
#include "backends/vulkan/vk_ops_common.h"

namespace deskside::backends::vulkan {
namespace {

struct RoutePush {
    uint32_t n_expert, n_used, n, softmax_first, normalize;
    uint32_t l_offset, l_stride, i_offset, i_stride, w_offset, w_stride;
};
struct AddIdPush {
    uint32_t ne0, n_rows, a_offset, a_stride, b_offset, b_stride, b_rows, i_offset, y_offset, y_stride;
};
struct CombinePush {
    uint32_t ne0, n, n_used, y_offset, y_stride, w_offset, w_stride, o_offset, o_stride;
};
struct SwigluPush {
    uint32_t ne0, ne1, g_offset, g_stride, u_offset, u_stride, y_offset, y_stride;
    float alpha, limit;
};

uint32_t stride_words(const Tensor& t) { return static_cast<uint32_t>(t.row_stride / 4); }

void require_ids(const Tensor& ids, const char* op) {
    require(
        !ids.empty() && ids.type == quant::TypeId::I32 && ids.offset % 4 == 0 && ids.row_stride == ids.row_bytes(), op,
        "ids must be a contiguous I32 tensor [n_used, n], got " + (ids.empty() ? std::string("none") : shape_of(ids)));
}

// The ids [n_used, n] as one row of n_used * n words (slot order).
Tensor flat(const Tensor& ids) {
    Tensor t = ids;
    t.ne0 = ids.ne0 * ids.ne1;
    t.ne1 = 1;
    t.row_stride = t.row_bytes();
    return t;
}

uint64_t element_groups(uint64_t n) { return (n + kEltwiseGroup - 1) / kEltwiseGroup; }

}  // namespace

void VulkanBackend::moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) {
    const char* op = "moe_route";
    require_f32(logits, op, "logits");
    require_f32(weights, op, "weights");
    require_ids(ids, op);
    const int64_t n = logits.ne1;
    require(p.n_expert > 0 && logits.ne0 == p.n_expert, op,
            "logits " + shape_of(logits) + " must be n_expert = " + std::to_string(p.n_expert) + " wide");
    require(p.n_used >= 1 && p.n_used <= p.n_expert, op,
            "n_used " + std::to_string(p.n_used) + " must be in [1, n_expert = " + std::to_string(p.n_expert) + "]");
    require(ids.ne0 == p.n_used && ids.ne1 == n && weights.ne0 == p.n_used && weights.ne1 == n, op,
            "ids " + shape_of(ids) + " and weights " + shape_of(weights) + " must be [n_used, n]");
    if (n == 0) return;
    const Binding bl = bind(logits, Access::Read), bi = bind(ids, Access::Write), bw = bind(weights, Access::ReadWrite);
    const RoutePush push{static_cast<uint32_t>(p.n_expert),
                         static_cast<uint32_t>(p.n_used),
                         static_cast<uint32_t>(n),
                         p.gating == MoeGating::SoftmaxThenTopK ? 1u : 0u,
                         p.normalize ? 1u : 0u,
                         words(bl.skip_bytes),
                         stride_words(logits),
                         words(bi.skip_bytes),
                         stride_words(ids),
                         words(bw.skip_bytes),
                         stride_words(weights)};
    constexpr uint32_t kTokensPerGroup = 64;
    dispatch(pipeline(caps().fp64 ? "moe_route_exact" : "moe_route", 3, sizeof(RoutePush), {kTokensPerGroup}),
             {bl, bi, bw}, &push, groups((n + kTokensPerGroup - 1) / kTokensPerGroup));
}

void VulkanBackend::matmul_id(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) {
    record_matmul_id(*this, w, n_expert, x, ids, y);
}

void VulkanBackend::add_id(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& y) {
    const char* op = "add_id";
    require_f32(a, op, "a");
    require_f32(b, op, "b");
    require_f32(y, op, "y");
    require_ids(ids, op);
    const int64_t rows = ids.ne0 * ids.ne1;
    require(a.ne0 == b.ne0 && a.ne0 == y.ne0 && a.ne1 == rows && y.ne1 == rows, op,
            "expected a, y [ne0, n_used * n], b [ne0, n_expert], ids [n_used, "
            "n]; got a " +
                shape_of(a) + ", b " + shape_of(b) + ", ids " + shape_of(ids) + ", y " + shape_of(y));
    if (rows == 0 || a.ne0 == 0) return;
    const Binding ba = bind(a, Access::Read), bb = bind(b, Access::Read), by = bind(y, Access::Write);
    const Binding bi = bind_index(flat(ids), 0, rows, op);
    const AddIdPush push{static_cast<uint32_t>(a.ne0), static_cast<uint32_t>(rows),
                         words(ba.skip_bytes),         stride_words(a),
                         words(bb.skip_bytes),         stride_words(b),
                         static_cast<uint32_t>(b.ne1), words(bi.skip_bytes),
                         words(by.skip_bytes),         stride_words(y)};
    dispatch(pipeline("add_id", 4, sizeof(AddIdPush), {kEltwiseGroup}), {ba, bb, bi, by}, &push,
             groups(element_groups(static_cast<uint64_t>(a.ne0) * rows)));
}

void VulkanBackend::moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) {
    const char* op = "moe_combine";
    require_f32(y, op, "y");
    require_f32(weights, op, "weights");
    require_f32(out, op, "out");
    const int64_t n_used = weights.ne0, n = weights.ne1;
    require(n_used >= 1 && y.ne0 == out.ne0 && y.ne1 == n_used * n && out.ne1 == n, op,
            "expected y [ne0, n_used * n], weights [n_used, n], out [ne0, n]; "
            "got y " +
                shape_of(y) + ", weights " + shape_of(weights) + ", out " + shape_of(out));
    if (n == 0 || y.ne0 == 0) return;
    const Binding byy = bind(y, Access::Read), bw = bind(weights, Access::Read), bo = bind(out, Access::Write);
    const CombinePush push{static_cast<uint32_t>(y.ne0), static_cast<uint32_t>(n), static_cast<uint32_t>(n_used),
                           words(byy.skip_bytes),        stride_words(y),          words(bw.skip_bytes),
                           stride_words(weights),        words(bo.skip_bytes),     stride_words(out)};
    dispatch(pipeline("moe_combine", 3, sizeof(CombinePush), {kEltwiseGroup}), {byy, bw, bo}, &push,
             groups(element_groups(static_cast<uint64_t>(y.ne0) * n)));
}

void VulkanBackend::swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, const Tensor& y) {
    const char* op = "swiglu_oai";
    require_f32(gate, op, "gate");
    require_f32(up, op, "up");
    require_f32(y, op, "y");
    require(gate.ne0 == up.ne0 && gate.ne0 == y.ne0 && gate.ne1 == up.ne1 && gate.ne1 == y.ne1, op,
            "shapes do not match: gate " + shape_of(gate) + ", up " + shape_of(up) + ", y " + shape_of(y));
    if (gate.ne0 == 0 || gate.ne1 == 0) return;
    const Pipeline& pl =
        pipeline(caps().fp64 ? "swiglu_oai_exact" : "swiglu_oai", 3, sizeof(SwigluPush), {kEltwiseGroup});
    for_row_chunks(*this, gate.ne1, {&gate, &up, &y}, [&](int64_t first, int64_t n) {
        const Binding bg = bind_rows(gate, first, n, Access::Read), bu = bind_rows(up, first, n, Access::Read);
        const Binding by = bind_rows(y, first, n, Access::Write);
        const SwigluPush push{static_cast<uint32_t>(gate.ne0),
                              static_cast<uint32_t>(n),
                              words(bg.skip_bytes),
                              stride_words(gate),
                              words(bu.skip_bytes),
                              stride_words(up),
                              words(by.skip_bytes),
                              stride_words(y),
                              alpha,
                              limit};
        dispatch(pl, {bg, bu, by}, &push, groups(element_groups(static_cast<uint64_t>(gate.ne0) * n)));
    });
}

}  // namespace deskside::backends::vulkan
