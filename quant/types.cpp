#include "quant/types.h"

#include <array>
#include <cassert>

namespace deskside::quant {
namespace {

// clang-format off
constexpr std::array kTypes{
    TypeInfo{TypeId::F32,     "f32",     1,   4},
    TypeInfo{TypeId::F16,     "f16",     1,   2},
    TypeInfo{TypeId::Q4_0,    "q4_0",    32,  18},
    TypeInfo{TypeId::Q4_1,    "q4_1",    32,  20},
    TypeInfo{TypeId::Q5_0,    "q5_0",    32,  22},
    TypeInfo{TypeId::Q5_1,    "q5_1",    32,  24},
    TypeInfo{TypeId::Q8_0,    "q8_0",    32,  34},
    TypeInfo{TypeId::Q8_1,    "q8_1",    32,  36},
    TypeInfo{TypeId::Q2_K,    "q2_K",    256, 84},
    TypeInfo{TypeId::Q3_K,    "q3_K",    256, 110},
    TypeInfo{TypeId::Q4_K,    "q4_K",    256, 144},
    TypeInfo{TypeId::Q5_K,    "q5_K",    256, 176},
    TypeInfo{TypeId::Q6_K,    "q6_K",    256, 210},
    TypeInfo{TypeId::Q8_K,    "q8_K",    256, 292},
    TypeInfo{TypeId::IQ2_XXS, "iq2_xxs", 256, 66},
    TypeInfo{TypeId::IQ2_XS,  "iq2_xs",  256, 74},
    TypeInfo{TypeId::IQ3_XXS, "iq3_xxs", 256, 98},
    TypeInfo{TypeId::IQ1_S,   "iq1_s",   256, 50},
    TypeInfo{TypeId::IQ4_NL,  "iq4_nl",  32,  18},
    TypeInfo{TypeId::IQ3_S,   "iq3_s",   256, 110},
    TypeInfo{TypeId::IQ2_S,   "iq2_s",   256, 82},
    TypeInfo{TypeId::IQ4_XS,  "iq4_xs",  256, 136},
    TypeInfo{TypeId::I8,      "i8",      1,   1},
    TypeInfo{TypeId::I16,     "i16",     1,   2},
    TypeInfo{TypeId::I32,     "i32",     1,   4},
    TypeInfo{TypeId::I64,     "i64",     1,   8},
    TypeInfo{TypeId::F64,     "f64",     1,   8},
    TypeInfo{TypeId::IQ1_M,   "iq1_m",   256, 56},
    TypeInfo{TypeId::BF16,    "bf16",    1,   2},
    TypeInfo{TypeId::TQ1_0,   "tq1_0",   256, 54},
    TypeInfo{TypeId::TQ2_0,   "tq2_0",   256, 66},
    TypeInfo{TypeId::MXFP4,   "mxfp4",   32,  17},
};
// clang-format on

}  // namespace

std::optional<TypeInfo> type_info(uint32_t raw_id) {
    for (const TypeInfo& t : kTypes) {
        if (static_cast<uint32_t>(t.id) == raw_id) return t;
    }
    return std::nullopt;
}

const TypeInfo& type_info(TypeId id) {
    for (const TypeInfo& t : kTypes) {
        if (t.id == id) return t;
    }
    assert(false && "TypeId not in the table");
    return kTypes[0];
}

std::span<const TypeInfo> all_types() { return kTypes; }

size_t row_bytes(TypeId id, int64_t n_elements) {
    const TypeInfo& t = type_info(id);
    assert(n_elements % t.block_size == 0);
    return static_cast<size_t>(n_elements / t.block_size) * t.block_bytes;
}

}  // namespace deskside::quant
