// Selection of the tiled gemm kernels and SIMD activation quantizers: one table each, keyed by
// (type, instruction set), consulted at the level dot_kernels.cpp selected.
#include "backends/cpu/gemm_kernels.h"

#include <array>

#include "backends/cpu/dot_isa.h"
#include "backends/cpu/gemm_isa.h"
#include "quant/activation_quant.h"

namespace deskside::backends::cpu {
namespace {

using quant::TypeId;

struct Gemm {
    TypeId type;
    CpuIsa isa;
    GemmFn fn;
    quant::VecDotFn twin;  // the single-row kernel whose results it reproduces
};

// clang-format off
constexpr std::array kGemms{
    Gemm{TypeId::Q4_0,   CpuIsa::Avx2, gemm_q4_0_avx2,   vec_dot_q4_0_avx2},
    Gemm{TypeId::Q5_0,   CpuIsa::Avx2, gemm_q5_0_avx2,   vec_dot_q5_0_avx2},
    Gemm{TypeId::Q8_0,   CpuIsa::Avx2, gemm_q8_0_avx2,   vec_dot_q8_0_avx2},
    Gemm{TypeId::IQ4_NL, CpuIsa::Avx2, gemm_iq4_nl_avx2, vec_dot_iq4_nl_avx2},
    Gemm{TypeId::MXFP4,  CpuIsa::Avx2, gemm_mxfp4_avx2,  vec_dot_mxfp4_avx2},
    Gemm{TypeId::Q4_K,   CpuIsa::Avx2, gemm_q4_k_avx2,   vec_dot_q4_k_avx2},
    Gemm{TypeId::Q6_K,   CpuIsa::Avx2, gemm_q6_k_avx2,   vec_dot_q6_k_avx2},
};

struct Quantizer {
    TypeId type;
    CpuIsa isa;
    quant::FromFloatFn fn;
};

constexpr std::array kQuantizers{
    Quantizer{TypeId::Q8_0, CpuIsa::Avx2, quantize_q8_0_avx2},
    Quantizer{TypeId::Q8_1, CpuIsa::Avx2, quantize_q8_1_avx2},
    Quantizer{TypeId::Q8_K, CpuIsa::Avx2, quantize_q8_k_avx2},
};
// clang-format on

const Gemm* find_gemm(TypeId type, CpuIsa isa) {
    for (const Gemm& g : kGemms) {
        if (g.type == type && g.isa == isa) return &g;
    }
    return nullptr;
}

}  // namespace

GemmFn gemm_for(TypeId weight_type, CpuIsa isa) {
    const Gemm* g = find_gemm(weight_type, isa);
    return g != nullptr ? g->fn : nullptr;
}

GemmFn best_gemm(TypeId weight_type) {
    // Only where the decode path uses this gemm's twin: an AVX-512 machine dots Q4_0 with the
    // AVX-512 kernel, whose float order differs from the AVX2 tile's.
    const quant::VecDotFn dot = best_vec_dot(weight_type);
    for (CpuIsa level : {CpuIsa::Avx512, CpuIsa::Avx2}) {
        if (static_cast<int>(level) > static_cast<int>(selected_isa())) continue;
        const Gemm* g = find_gemm(weight_type, level);
        if (g != nullptr && g->twin == dot) return g->fn;
    }
    return nullptr;
}

quant::FromFloatFn activation_quantizer_for(TypeId vec_dot_type, CpuIsa isa) {
    for (const Quantizer& q : kQuantizers) {
        if (q.type == vec_dot_type && q.isa == isa) return q.fn;
    }
    return nullptr;
}

quant::FromFloatFn best_activation_quantizer(TypeId vec_dot_type) {
    // Every AVX-512 machine runs the AVX2 quantizers, and they are exact, so any level works.
    if (selected_isa() != CpuIsa::Scalar) {
        if (quant::FromFloatFn fn = activation_quantizer_for(vec_dot_type, CpuIsa::Avx2)) return fn;
    }
    return quant::activation_from_float(vec_dot_type);
}

}  // namespace deskside::backends::cpu
