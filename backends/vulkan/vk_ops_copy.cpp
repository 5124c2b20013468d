// Vulkan copy and set_rows: row conversion between F32, F16 and Q8_0 (shaders/convert.comp).
#include <string>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_ops_common.h"
#include "backends/vulkan/vk_shaders.h"
#include "quant/quant.h"

namespace deskside::backends::vulkan {
namespace {

constexpr int64_t kChunk = 256;  // elements per workgroup (convert.comp)

struct ConvertPush {
    uint32_t ne0, n_rows, src_offset, src_stride, dst_offset, dst_stride, has_ids, chunks_per_row, ids_offset;
};

// The convert variant for a type pair; throws naming the pair when there is none.
std::string convert_variant(const char* op, const Tensor& src, const Tensor& dst) {
    const std::string name = "convert_" + std::string(quant::type_info(src.type).name) + "_" +
                             std::string(quant::type_info(dst.type).name);
    for (const ShaderCode& s : all_shaders())
        if (name == s.name) return name;
    throw std::invalid_argument(std::string("vulkan ") + op + ": no conversion from " +
                                std::string(quant::type_info(src.type).name) + " to " +
                                std::string(quant::type_info(dst.type).name) +
                                " (supported: f32 -> f32/f16/q8_0, f16 -> f32/f16, q8_0 -> f32, and any type to itself)");
}

}  // namespace

void VulkanBackend::copy(const Tensor& src, const Tensor& dst) {
    require(src.ne0 == dst.ne0 && src.ne1 == dst.ne1, "copy", "shapes do not match: src " + shape_of(src) + ", dst " + shape_of(dst));
    if (src.type == dst.type && quant::quant_traits(src.type)) {
        // Same type (a KV cache block copied for a forked sequence): the bytes, row by row or at
        // once when both are contiguous.
        const VulkanBuffer& s = own(*src.buffer, "copy source");
        const VulkanBuffer& d = own(*dst.buffer, "copy destination");
        const size_t row = src.row_bytes();
        require(src.offset + (src.ne1 > 0 ? (src.ne1 - 1) * src.row_stride + row : 0) <= s.size() &&
                    dst.offset + (dst.ne1 > 0 ? (dst.ne1 - 1) * dst.row_stride + row : 0) <= d.size(),
                "copy", "src " + shape_of(src) + " or dst " + shape_of(dst) + " lies outside its buffer");
        if (src.ne1 == 0 || row == 0) return;
        if (src.row_stride == row && dst.row_stride == row) {
            record_copy(s.handle(), src.offset, d.handle(), dst.offset, row * static_cast<size_t>(src.ne1));
        } else {
            for (int64_t r = 0; r < src.ne1; ++r)
                record_copy(s.handle(), src.offset + r * src.row_stride, d.handle(), dst.offset + r * dst.row_stride, row);
        }
        return;
    }
    const std::string variant = convert_variant("copy", src, dst);
    if (src.ne1 == 0 || src.ne0 == 0) return;
    const Pipeline& p = pipeline(variant, 3, sizeof(ConvertPush));
    const uint32_t chunks = static_cast<uint32_t>((src.ne0 + kChunk - 1) / kChunk);
    for_row_chunks(*this, src.ne1, {&src, &dst}, [&](int64_t first, int64_t n) {
        const Binding bs = bind_rows(src, first, n, Access::Read);
        const Binding bd = bind_rows(dst, first, n, Access::ReadWrite);
        const ConvertPush push{static_cast<uint32_t>(src.ne0), static_cast<uint32_t>(n), bs.skip_bytes,
                               static_cast<uint32_t>(src.row_stride), bd.skip_bytes, static_cast<uint32_t>(dst.row_stride),
                               0, chunks, 0};
        // The shader never reads the ids binding without has_ids; src stands in for it.
        dispatch(p, {bs, bd, bs}, &push, groups(static_cast<uint64_t>(n) * chunks));
    });
}

void VulkanBackend::set_rows(const Tensor& src, const Tensor& dst, const Tensor& rows) {
    require(src.ne0 == dst.ne0, "set_rows", "row widths differ: src " + shape_of(src) + ", dst " + shape_of(dst));
    const std::string variant = convert_variant("set_rows", src, dst);
    if (src.ne1 == 0 || src.ne0 == 0) return;
    const Pipeline& p = pipeline(variant, 3, sizeof(ConvertPush));
    const uint32_t chunks = static_cast<uint32_t>((src.ne0 + kChunk - 1) / kChunk);
    // The destination (a KV cache layer) is bound whole: its rows are scattered.
    const Binding bd = bind(dst, Access::ReadWrite);
    for_row_chunks(*this, src.ne1, {&src}, [&](int64_t first, int64_t n) {
        const Binding ids = bind_index(rows, first, n, "set_rows");
        const Binding bs = bind_rows(src, first, n, Access::Read);
        const ConvertPush push{static_cast<uint32_t>(src.ne0), static_cast<uint32_t>(n), bs.skip_bytes,
                               static_cast<uint32_t>(src.row_stride), bd.skip_bytes, static_cast<uint32_t>(dst.row_stride),
                               1, chunks, words(ids.skip_bytes)};
        dispatch(p, {bs, bd, ids}, &push, groups(static_cast<uint64_t>(n) * chunks));
    });
}

}  // namespace deskside::backends::vulkan
