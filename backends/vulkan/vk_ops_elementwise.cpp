// Vulkan element-wise ops: add, mul (b broadcast when it has one row), scale, silu, gelu
// (shaders/eltwise.comp).
#include <cstring>
#include <vector>

#include "backends/gelu_table.h"
#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_ops_common.h"

namespace deskside::backends::vulkan {
namespace {

struct EltwisePush {
    uint32_t ne0, ne1;
    uint32_t a_offset, a_stride;
    uint32_t b_offset, b_stride;
    uint32_t y_offset, y_stride;
    float scalar;
};

void record_binary(VulkanBackend& be, const char* op, const Tensor& a, const Tensor& b, const Tensor& y) {
    require_f32(a, op, "a");
    require_f32(b, op, "b");
    require_f32(y, op, "y");
    require(a.ne0 == b.ne0 && a.ne0 == y.ne0 && a.ne1 == y.ne1 && (b.ne1 == a.ne1 || b.ne1 == 1), op,
            "shapes do not match: a " + shape_of(a) + ", b " + shape_of(b) + ", y " + shape_of(y));
    if (a.ne1 == 0 || a.ne0 == 0) return;
    const Pipeline& p = be.pipeline(op, 3, sizeof(EltwisePush), {kEltwiseGroup});
    const bool broadcast = b.ne1 == 1;
    for_row_chunks(be, a.ne1, {&a, &b, &y}, [&](int64_t first, int64_t n) {
        const Binding ba = be.bind_rows(a, first, n, Access::Read);
        const Binding bb = broadcast ? be.bind(b, Access::Read) : be.bind_rows(b, first, n, Access::Read);
        const Binding by = be.bind_rows(y, first, n, Access::Write);
        const EltwisePush push{static_cast<uint32_t>(a.ne0), static_cast<uint32_t>(n),
                               words(ba.skip_bytes), static_cast<uint32_t>(a.row_stride / 4),
                               words(bb.skip_bytes), broadcast ? 0u : static_cast<uint32_t>(b.row_stride / 4),
                               words(by.skip_bytes), static_cast<uint32_t>(y.row_stride / 4), 0.0f};
        be.dispatch(p, {ba, bb, by}, &push, be.groups((a.ne0 * n + kEltwiseGroup - 1) / kEltwiseGroup));
    });
}

// `table`: a third binding the shader reads whole (gelu's lookup table), or none.
void record_unary(VulkanBackend& be, const char* op, const Tensor& x, const Tensor& y, float scalar,
                  const Tensor* table = nullptr) {
    require_f32(x, op, "x");
    require_f32(y, op, "y");
    require(x.ne0 == y.ne0 && x.ne1 == y.ne1, op, "shapes do not match: x " + shape_of(x) + ", y " + shape_of(y));
    if (x.ne1 == 0 || x.ne0 == 0) return;
    const Pipeline& p = be.pipeline(op, table ? 3 : 2, sizeof(EltwisePush), {kEltwiseGroup});
    for_row_chunks(be, x.ne1, {&x, &y}, [&](int64_t first, int64_t n) {
        const Binding bx = be.bind_rows(x, first, n, Access::Read);
        const Binding by = be.bind_rows(y, first, n, Access::Write);
        const EltwisePush push{static_cast<uint32_t>(x.ne0), static_cast<uint32_t>(n),
                               words(bx.skip_bytes), static_cast<uint32_t>(x.row_stride / 4), 0, 0,
                               words(by.skip_bytes), static_cast<uint32_t>(y.row_stride / 4), scalar};
        const Groups g = be.groups((x.ne0 * n + kEltwiseGroup - 1) / kEltwiseGroup);
        if (table) be.dispatch(p, {bx, by, be.bind(*table, Access::Read)}, &push, g);
        else be.dispatch(p, {bx, by}, &push, g);
    });
}

}  // namespace

void VulkanBackend::add(const Tensor& a, const Tensor& b, const Tensor& y) { record_binary(*this, "add", a, b, y); }
void VulkanBackend::mul(const Tensor& a, const Tensor& b, const Tensor& y) { record_binary(*this, "mul", a, b, y); }
void VulkanBackend::scale(const Tensor& x, float s, const Tensor& y) { record_unary(*this, "scale", x, y, s); }
void VulkanBackend::silu(const Tensor& x, const Tensor& y) {
    record_unary(*this, caps().fp64 ? "silu_exact" : "silu", x, y, 0.0f);
}
void VulkanBackend::gelu(const Tensor& x, const Tensor& y) {
    // The CPU backend's table (backends/gelu_table.h), uploaded on first use.
    if (!gelu_table_) {
        const std::vector<float> table = gelu_f16_table();
        gelu_table_ = alloc(table.size() * sizeof(float));
        upload(*gelu_table_, 0, table.data(), table.size() * sizeof(float));
    }
    const Tensor table{gelu_table_.get(), 0, quant::TypeId::F32, 1 << 16, 1, (1 << 16) * sizeof(float)};
    record_unary(*this, "gelu", x, y, 0.0f, &table);
}

}  // namespace deskside::backends::vulkan
