// Vulkan rms_norm (shaders/rownorm.comp) and rope (shaders/rope.comp, rotations from
// backends/rope_angles.h on the host).
#include <vector>

#include "backends/rope_angles.h"
#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_ops_common.h"

namespace deskside::backends::vulkan {
namespace {

// One workgroup per row; a power of two (the shader's reduction tree needs it). The reduction
// (subgroup operations or the shared-memory tree, shaders/rownorm.comp) depends only on the
// device, so every row count rounds alike.
constexpr uint32_t kRowGroup = 256;

struct RowNormPush {
    uint32_t ne0, n_rows;
    uint32_t x_offset, x_stride;
    uint32_t w_offset, has_weight;
    uint32_t y_offset, y_stride;
    float eps;
};

struct RopePush {
    uint32_t n_tokens, x_offset, x_stride, n_head, head_dim, n_rot, neox, pos_offset;
};

}  // namespace

void VulkanBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
    require_f32(x, "rms_norm", "x");
    require_f32(y, "rms_norm", "y");
    require(x.ne0 == y.ne0 && x.ne1 == y.ne1, "rms_norm", "shapes do not match: x " + shape_of(x) + ", y " + shape_of(y));
    if (!weight.empty()) {
        require_f32(weight, "rms_norm", "weight");
        require(weight.ne0 == x.ne0, "rms_norm", "weight " + shape_of(weight) + " does not match x " + shape_of(x));
    }
    if (x.ne1 == 0) return;
    const char* variant = caps().fp64 ? "rms_norm_exact" : caps().subgroup_arithmetic ? "rms_norm_sg" : "rms_norm";
    const Pipeline& p = pipeline(variant, 3, sizeof(RowNormPush), {kRowGroup});
    const Binding bw = weight.empty() ? Binding{} : bind_rows(weight, 0, 1, Access::Read);
    for_row_chunks(*this, x.ne1, {&x, &y}, [&](int64_t first, int64_t n) {
        const Binding bx = bind_rows(x, first, n, Access::Read);
        const Binding by = bind_rows(y, first, n, Access::Write);
        const RowNormPush push{static_cast<uint32_t>(x.ne0), static_cast<uint32_t>(n),
                               words(bx.skip_bytes), static_cast<uint32_t>(x.row_stride / 4),
                               weight.empty() ? 0u : words(bw.skip_bytes), weight.empty() ? 0u : 1u,
                               words(by.skip_bytes), static_cast<uint32_t>(y.row_stride / 4), eps};
        // Without a weight the shader never reads binding 1; x stands in for it.
        dispatch(p, {bx, weight.empty() ? bx : bw, by}, &push, groups(n));
    });
}

const Tensor& VulkanBackend::rope_table(const RopeParams& rp) {
    RopeTableKey key = rope_table_key(rp);
    for (const auto& [k, t] : rope_tables_)
        if (k == key) return t.tensor;
    const int64_t half = rp.n_rot / 2;
    const std::vector<float> rotations = rope_rotation_table(rp);  // the CPU backend's values
    RopeTable table;
    table.buffer = alloc(rotations.size() * sizeof(float));
    upload(*table.buffer, 0, rotations.data(), rotations.size() * sizeof(float));
    table.tensor = make_tensor(table.buffer.get(), 0, quant::TypeId::F32, half * 2, rp.n_ctx);
    rope_tables_.emplace_back(std::move(key), std::move(table));
    return rope_tables_.back().second.tensor;
}

void VulkanBackend::rope(const Tensor& x, const Tensor& positions, const RopeParams& rp) {
    require_f32(x, "rope", "x");
    require(x.ne0 == rp.n_head * rp.head_dim, "rope", "x " + shape_of(x) + " is not n_head * head_dim wide");
    require(rp.n_rot <= rp.head_dim && rp.n_rot % 2 == 0 && rp.n_rot > 0, "rope",
            "n_rot " + std::to_string(rp.n_rot) + " must be even and at most head_dim " + std::to_string(rp.head_dim));
    require(rp.freq_factors.empty() || static_cast<int64_t>(rp.freq_factors.size()) >= rp.n_rot / 2, "rope",
            "freq_factors holds " + std::to_string(rp.freq_factors.size()) + " values, n_rot / 2 needed");
    require(rp.n_ctx > 0, "rope", "n_ctx (the bound on positions) must be set");
    if (x.ne1 == 0) return;
    RopePush push{};
    push.n_head = static_cast<uint32_t>(rp.n_head);
    push.head_dim = static_cast<uint32_t>(rp.head_dim);
    push.n_rot = static_cast<uint32_t>(rp.n_rot);
    push.neox = rp.neox ? 1 : 0;
    const Pipeline& p = pipeline(caps().fp64 ? "rope_exact" : "rope", 3, sizeof(RopePush), {kEltwiseGroup});
    const int64_t half = rp.n_rot / 2;
    const Binding rot = bind(rope_table(rp), Access::Read);
    for_row_chunks(*this, x.ne1, {&x}, [&](int64_t first, int64_t n) {
        const Binding bp = bind_index(positions, first, n, "rope");
        const Binding bx = bind_rows(x, first, n, Access::ReadWrite);
        push.n_tokens = static_cast<uint32_t>(n);
        push.x_offset = words(bx.skip_bytes);
        push.x_stride = static_cast<uint32_t>(x.row_stride / 4);
        push.pos_offset = words(bp.skip_bytes);
        dispatch(p, {bx, rot, bp}, &push, groups((n * half + kEltwiseGroup - 1) / kEltwiseGroup));
    });
}

}  // namespace deskside::backends::vulkan
