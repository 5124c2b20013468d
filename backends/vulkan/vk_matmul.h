// The Vulkan weight ops: matmul (y = W x) and get_rows for F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q2_K..Q6_K, IQ4_NL and IQ4_XS weights, recorded into a VulkanBackend's command buffer.
//
// Quantized weights are multiplied as the CPU backend and llama.cpp do: activations quantized to
// the type's vec_dot_type with the CPU's bytes (Q8_0, Q8_1 for Q4_1/Q5_1: shaders/matmul_q8.comp;
// Q8_K for the K-quants and IQ4_XS: shaders/matmul_q8k.comp), integer dot products per block,
// scaled in float. F32, F16 and BF16 weights are dequantized in the shader (shaders/dequant.glsl;
// get_rows too, to exactly quant::to_float's values) and dotted with F32 activations
// (shaders/matmul.comp). Either way an output is rounded in a fixed order
// that does not depend on the number of columns (DESIGN.md key decision 5). Tensors larger than
// one storage-buffer binding (maxStorageBufferRange) are processed in row ranges that fit.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "backends/backend.h"

namespace deskside::backends::vulkan {

class VulkanBackend;

// y = W x (Backend::matmul): w [k, n_out] of a type above, x [k, m] F32, y [n_out, m] F32.
// Throws std::invalid_argument naming the problem for an unsupported type or mismatched shapes.
void record_matmul(VulkanBackend& be, const Tensor& w, const Tensor& x, const Tensor& y);

// Backend::matmul_id: each output row as record_matmul computes it with its expert's matrix
// (the matmul_id_* twins of the matmul shaders, one column per workgroup). Experts are bound as
// many at a time as one binding holds; an expert id outside [0, n_expert) leaves its row unwritten
// (device-side ids are not checked). Throws std::invalid_argument for bad types or shapes.
void record_matmul_id(VulkanBackend& be, const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids,
                      const Tensor& y);

// dst[:, i] = table row ids[i] as F32 (Backend::get_rows): bit-identical to quant::to_float.
// Throws std::out_of_range for an id outside the table.
void record_get_rows(VulkanBackend& be, const Tensor& table, const Tensor& ids, const Tensor& dst);

// Throws std::invalid_argument unless w's offset and row stride suit the weight shaders
// (even, or a multiple of 4 for F32); GGUF tensors always do.
void require_weight_alignment(const Tensor& w, const char* op);

// The shader variant suffix of a weight type ("q4_k"), or nullptr when unsupported.
const char* vulkan_type_suffix(quant::TypeId type);

// `base` ("matmul_q8dot_q4_0", "get_rows_f16") or, where the device has 16-bit storage and the
// type has 16-bit fields (every type but F32), its USE_STORAGE16 twin `base`_s16: the same bits
// read with 16-bit loads (shaders/dequant.glsl).
std::string weight_shader(const VulkanBackend& be, std::string base, quant::TypeId type);

}  // namespace deskside::backends::vulkan
