// Helpers shared by the op files: argument checks that name the op, and row-range splitting
// for tensors larger than one storage-buffer binding.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "backends/vulkan/vk_backend.h"

namespace deskside::backends::vulkan {

// Workgroup size of the element-wise and copy shaders (specialization constant 0).
constexpr uint32_t kEltwiseGroup = 256;

inline std::string shape_of(const Tensor& t) {
    return "[" + std::to_string(t.ne0) + ", " + std::to_string(t.ne1) + "] " + std::string(quant::type_info(t.type).name);
}

// Throws std::invalid_argument("vulkan <op>: <what> (shapes)") unless ok.
inline void require(bool ok, const char* op, const std::string& what) {
    if (!ok) throw std::invalid_argument(std::string("vulkan ") + op + ": " + what);
}

inline void require_f32(const Tensor& t, const char* op, const char* name) {
    require(t.type == quant::TypeId::F32 && t.row_stride % 4 == 0 && t.offset % 4 == 0, op,
            std::string(name) + " must be F32 with 4-byte aligned rows, got " + shape_of(t));
}

inline uint32_t words(uint32_t bytes) { return bytes / 4; }

// Calls fn(first, n) over consecutive row ranges covering [0, n_rows), each small enough that
// rows [first, first + n) of every tensor in `tensors` fit one binding.
template <class Fn>
void for_row_chunks(const VulkanBackend& be, int64_t n_rows, std::initializer_list<const Tensor*> tensors, Fn&& fn) {
    int64_t chunk = n_rows;
    for (const Tensor* t : tensors) chunk = std::min(chunk, be.rows_per_binding(*t));
    chunk = std::max<int64_t>(chunk, 1);
    for (int64_t first = 0; first < n_rows; first += chunk) fn(first, std::min(chunk, n_rows - first));
}

}  // namespace deskside::backends::vulkan
