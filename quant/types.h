// The tensor element types of GGUF, keyed by their on-disk type ids (ggml_type).
//
// This is the one table every part of deskside reads to learn how many bytes a row of a given
// type takes: the GGUF reader (to validate tensor sizes), the planners (to size buffers) and the
// kernels. Types that deskside cannot compute with yet are still listed with their block
// geometry, so that `inspect` can describe every file users have.
// ref: ggml/include/ggml.h (enum ggml_type) and ggml/src/ggml-common.h (block layouts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace deskside::quant {

enum class TypeId : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
};

// Block geometry of one type: `block_size` elements are stored in `block_bytes` bytes.
struct TypeInfo {
    TypeId id;
    std::string_view name;  // as llama.cpp prints it: "f32", "q4_K", ...
    int64_t block_size;
    size_t block_bytes;
};

// The geometry of a GGUF type id, or nullopt for ids that are not (or no longer) valid.
std::optional<TypeInfo> type_info(uint32_t raw_id);
const TypeInfo& type_info(TypeId id);

// Every valid type, in id order.
std::span<const TypeInfo> all_types();

// Bytes of a row of `n_elements` elements; n_elements must be a multiple of the block size.
size_t row_bytes(TypeId id, int64_t n_elements);

}  // namespace deskside::quant
