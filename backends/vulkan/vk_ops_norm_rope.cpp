// Vulkan rms_norm, softmax (shaders/rownorm.comp) and rope (shaders/rope.comp, rotations from
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
    uint32_t n_tokens, x_offset, x_stride, n_head, head_dim, n_rot, neox;
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

void VulkanBackend::softmax(const Tensor& x) {
    require_f32(x, "softmax", "x");
    if (x.ne1 == 0) return;
    const char* variant = caps().fp64 ? "softmax_exact" : caps().subgroup_arithmetic ? "softmax_sg" : "softmax";
    const Pipeline& p = pipeline(variant, 1, sizeof(RowNormPush), {kRowGroup});
    for_row_chunks(*this, x.ne1, {&x}, [&](int64_t first, int64_t n) {
        const Binding bx = bind_rows(x, first, n, Access::ReadWrite);
        const RowNormPush push{static_cast<uint32_t>(x.ne0), static_cast<uint32_t>(n),
                               words(bx.skip_bytes), static_cast<uint32_t>(x.row_stride / 4), 0, 0, 0, 0, 0.0f};
        dispatch(p, {bx}, &push, groups(n));
    });
}

void VulkanBackend::rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& rp) {
    require_f32(x, "rope", "x");
    require(x.ne0 == rp.n_head * rp.head_dim, "rope", "x " + shape_of(x) + " is not n_head * head_dim wide");
    require(static_cast<int64_t>(positions.size()) == x.ne1, "rope",
            std::to_string(positions.size()) + " positions for " + std::to_string(x.ne1) + " tokens");
    require(rp.n_rot <= rp.head_dim && rp.n_rot % 2 == 0 && rp.n_rot > 0, "rope",
            "n_rot " + std::to_string(rp.n_rot) + " must be even and at most head_dim " + std::to_string(rp.head_dim));
    require(rp.freq_factors.empty() || static_cast<int64_t>(rp.freq_factors.size()) >= rp.n_rot / 2, "rope",
            "freq_factors holds " + std::to_string(rp.freq_factors.size()) + " values, n_rot / 2 needed");
    if (x.ne1 == 0) return;
    RopePush push{};
    push.n_head = static_cast<uint32_t>(rp.n_head);
    push.head_dim = static_cast<uint32_t>(rp.head_dim);
    push.n_rot = static_cast<uint32_t>(rp.n_rot);
    push.neox = rp.neox ? 1 : 0;
    const Pipeline& p = pipeline(caps().fp64 ? "rope_exact" : "rope", 2, sizeof(RopePush), {kEltwiseGroup});
    const int64_t half = rp.n_rot / 2;
    // The rotations of every token, interleaved (cos, sin) per pair: the CPU backend's values.
    std::vector<float> rotations, cos_row(static_cast<size_t>(half)), sin_row(static_cast<size_t>(half));
    for_row_chunks(*this, x.ne1, {&x}, [&](int64_t first, int64_t n) {
        rotations.resize(static_cast<size_t>(n * half * 2));
        for (int64_t t = 0; t < n; ++t) {
            rope_angles(rp, positions[first + t], cos_row.data(), sin_row.data());
            for (int64_t i = 0; i < half; ++i) {
                rotations[2 * (t * half + i)] = cos_row[i];
                rotations[2 * (t * half + i) + 1] = sin_row[i];
            }
        }
        const Binding rot = upload_args(rotations.data(), rotations.size() * sizeof(float));
        const Binding bx = bind_rows(x, first, n, Access::ReadWrite);
        push.n_tokens = static_cast<uint32_t>(n);
        push.x_offset = words(bx.skip_bytes);
        push.x_stride = static_cast<uint32_t>(x.row_stride / 4);
        dispatch(p, {bx, rot}, &push, groups((n * half + kEltwiseGroup - 1) / kEltwiseGroup));
    });
}

}  // namespace deskside::backends::vulkan
