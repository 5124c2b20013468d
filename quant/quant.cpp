// The traits table: one row per type deskside computes with, keyed by GGUF type id.
//
// vec_dot_type follows llama.cpp's CPU backend (ggml-cpu type_traits_cpu), so activations are
// quantized exactly as llama.cpp quantizes them and our logits can be compared with its.
// ref: ggml/src/ggml-cpu/ggml-cpu.c (type_traits_cpu)
#include <array>

#include "quant/quant.h"
#include "quant/reference.h"

namespace deskside::quant {
namespace {

using namespace ref;

// clang-format off
constexpr std::array kTraits{
    QuantTraits{TypeId::F32,    to_float_f32,    from_float_f32,    TypeId::F32,  vec_dot_f32},
    QuantTraits{TypeId::F16,    to_float_f16,    from_float_f16,    TypeId::F16,  vec_dot_f16},
    QuantTraits{TypeId::BF16,   to_float_bf16,   from_float_bf16,   TypeId::BF16, vec_dot_bf16},
    QuantTraits{TypeId::Q4_0,   to_float_q4_0,   from_float_q4_0,   TypeId::Q8_0, vec_dot_q4_0},
    QuantTraits{TypeId::Q4_1,   to_float_q4_1,   from_float_q4_1,   TypeId::Q8_1, vec_dot_q4_1},
    QuantTraits{TypeId::Q5_0,   to_float_q5_0,   from_float_q5_0,   TypeId::Q8_0, vec_dot_q5_0},
    QuantTraits{TypeId::Q5_1,   to_float_q5_1,   from_float_q5_1,   TypeId::Q8_1, vec_dot_q5_1},
    QuantTraits{TypeId::Q8_0,   to_float_q8_0,   from_float_q8_0,   TypeId::Q8_0, vec_dot_q8_0},
    QuantTraits{TypeId::Q8_1,   to_float_q8_1,   from_float_q8_1,   TypeId::Q8_1, vec_dot_q8_1},
    QuantTraits{TypeId::Q2_K,   to_float_q2_k,   from_float_q2_k,   TypeId::Q8_K, vec_dot_q2_k},
    QuantTraits{TypeId::Q3_K,   to_float_q3_k,   from_float_q3_k,   TypeId::Q8_K, vec_dot_q3_k},
    QuantTraits{TypeId::Q4_K,   to_float_q4_k,   from_float_q4_k,   TypeId::Q8_K, vec_dot_q4_k},
    QuantTraits{TypeId::Q5_K,   to_float_q5_k,   from_float_q5_k,   TypeId::Q8_K, vec_dot_q5_k},
    QuantTraits{TypeId::Q6_K,   to_float_q6_k,   from_float_q6_k,   TypeId::Q8_K, vec_dot_q6_k},
    QuantTraits{TypeId::Q8_K,   to_float_q8_k,   from_float_q8_k,   TypeId::Q8_K, vec_dot_q8_k},
    QuantTraits{TypeId::IQ4_NL, to_float_iq4_nl, nullptr,           TypeId::Q8_0, vec_dot_iq4_nl},
    QuantTraits{TypeId::IQ4_XS, to_float_iq4_xs, nullptr,           TypeId::Q8_K, vec_dot_iq4_xs},
    QuantTraits{TypeId::IQ2_XXS, to_float_iq2_xxs, nullptr,         TypeId::Q8_K, vec_dot_iq2_xxs},
    QuantTraits{TypeId::IQ2_XS, to_float_iq2_xs, nullptr,           TypeId::Q8_K, vec_dot_iq2_xs},
    QuantTraits{TypeId::IQ2_S,  to_float_iq2_s,  nullptr,           TypeId::Q8_K, vec_dot_iq2_s},
    QuantTraits{TypeId::IQ3_XXS, to_float_iq3_xxs, nullptr,         TypeId::Q8_K, vec_dot_iq3_xxs},
    QuantTraits{TypeId::IQ3_S,  to_float_iq3_s,  nullptr,           TypeId::Q8_K, vec_dot_iq3_s},
    QuantTraits{TypeId::IQ1_S,  to_float_iq1_s,  nullptr,           TypeId::Q8_K, vec_dot_iq1_s},
    QuantTraits{TypeId::IQ1_M,  to_float_iq1_m,  nullptr,           TypeId::Q8_K, vec_dot_iq1_m},
    QuantTraits{TypeId::TQ1_0,  to_float_tq1_0,  from_float_tq1_0,  TypeId::Q8_K, vec_dot_tq1_0},
    QuantTraits{TypeId::TQ2_0,  to_float_tq2_0,  from_float_tq2_0,  TypeId::Q8_K, vec_dot_tq2_0},
    QuantTraits{TypeId::MXFP4,  to_float_mxfp4,  from_float_mxfp4,  TypeId::Q8_0, vec_dot_mxfp4},
};
// clang-format on

}  // namespace

const QuantTraits* quant_traits(TypeId id) {
    for (const QuantTraits& t : kTraits) {
        if (t.type == id) return &t;
    }
    return nullptr;
}

}  // namespace deskside::quant
