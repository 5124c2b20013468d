// Backend::get_rows on Vulkan: dequantizes the selected table rows to F32 with
// shaders/get_rows.comp (bit-identical to quant::to_float).
//
// A table larger than one storage-buffer binding (a 262144-token embedding easily is) is bound
// in windows of rows; each window that holds a requested row gets one dispatch over all ids,
// and the shader writes only the ids inside its window.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_matmul.h"

namespace deskside::backends::vulkan {
namespace {

// Push constants of shaders/get_rows.comp, in its order.
struct GetRowsParams {
    uint32_t ne0, n_ids, ids_offset;
    uint32_t row_first, n_rows;
    uint32_t t_offset, t_stride;      // bytes
    uint32_t dst_offset, dst_stride;  // F32 elements
};

// shaders/get_rows.comp: 64 invocations per workgroup, 32 elements (one unit) each.
constexpr int64_t kElementsPerGroup = 64 * 32;

}  // namespace

void record_get_rows(VulkanBackend& be, const Tensor& table, const Tensor& ids, const Tensor& dst) {
    const char* suffix = vulkan_type_suffix(table.type);
    if (!suffix)
        throw std::invalid_argument("vulkan get_rows: unsupported table type " + std::string(quant::type_info(table.type).name));
    if (dst.type != quant::TypeId::F32 || dst.ne0 != table.ne0)
        throw std::invalid_argument("vulkan get_rows: dst must be [" + std::to_string(table.ne0) + ", n] f32, got [" +
                                    std::to_string(dst.ne0) + ", " +
                                    std::to_string(dst.ne1) + "] " + std::string(quant::type_info(dst.type).name));
    require_weight_alignment(table, "get_rows");
    if (dst.offset % 4 || dst.row_stride % 4)
        throw std::invalid_argument("vulkan get_rows: dst must be 4-byte aligned (offset " + std::to_string(dst.offset) + ")");
    const int64_t n_ids = dst.ne1;
    if (n_ids == 0 || table.ne0 == 0) return;

    const std::optional<Binding> codebook = be.iq_codebook(table.type);  // a 4th binding for the i-quants
    const std::string variant = weight_shader(be, std::string("get_rows_") + suffix, table.type);
    const Pipeline& pipe = be.pipeline(variant, codebook ? 4 : 3, sizeof(GetRowsParams));
    const Binding id_binding = be.bind_index(ids, 0, n_ids, "get_rows");
    const int64_t window = be.rows_per_binding(table);
    const int64_t ids_step = be.rows_per_binding(dst);
    const uint64_t groups_per_id = static_cast<uint64_t>((table.ne0 + kElementsPerGroup - 1) / kElementsPerGroup);
    for (int64_t r0 = 0; r0 < table.ne1; r0 += window) {
        const int64_t nr = std::min(window, table.ne1 - r0);
        const Binding tb = be.bind_rows(table, r0, nr, Access::Read);
        for (int64_t i0 = 0; i0 < n_ids; i0 += ids_step) {
            const int64_t ni = std::min(ids_step, n_ids - i0);
            const Binding db = be.bind_rows(dst, i0, ni, Access::Write);
            const GetRowsParams params{static_cast<uint32_t>(table.ne0),
                                       static_cast<uint32_t>(ni),
                                       static_cast<uint32_t>(i0 + id_binding.skip_bytes / 4),
                                       static_cast<uint32_t>(r0),
                                       static_cast<uint32_t>(nr),
                                       tb.skip_bytes,
                                       static_cast<uint32_t>(table.row_stride),
                                       db.skip_bytes / 4,
                                       static_cast<uint32_t>(dst.row_stride / 4)};
            const Groups groups = be.groups(groups_per_id * static_cast<uint64_t>(ni));
            if (codebook) {
                be.dispatch(pipe, {tb, id_binding, db, *codebook}, &params, groups);
            } else {
                be.dispatch(pipe, {tb, id_binding, db}, &params, groups);
            }
        }
    }
}

}  // namespace deskside::backends::vulkan
