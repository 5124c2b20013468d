// Kernel selection: one table of (type, instruction set, kernel), and the choice of instruction
// set made once per process from CPUID (or DESKSIDE_CPU_ISA).
#include "backends/cpu/dot_kernels.h"

#include <array>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dot_isa.h"

namespace deskside::backends::cpu {
namespace {

using quant::TypeId;

struct Kernel {
    TypeId type;
    CpuIsa isa;
    quant::VecDotFn fn;
};

// clang-format off
constexpr std::array kKernels{
    Kernel{TypeId::F32,    CpuIsa::Avx2,   vec_dot_f32_avx2},
    Kernel{TypeId::F16,    CpuIsa::Avx2,   vec_dot_f16_avx2},
    Kernel{TypeId::BF16,   CpuIsa::Avx2,   vec_dot_bf16_avx2},
    Kernel{TypeId::Q4_0,   CpuIsa::Avx2,   vec_dot_q4_0_avx2},
    Kernel{TypeId::Q4_1,   CpuIsa::Avx2,   vec_dot_q4_1_avx2},
    Kernel{TypeId::Q5_0,   CpuIsa::Avx2,   vec_dot_q5_0_avx2},
    Kernel{TypeId::Q5_1,   CpuIsa::Avx2,   vec_dot_q5_1_avx2},
    Kernel{TypeId::Q8_0,   CpuIsa::Avx2,   vec_dot_q8_0_avx2},
    Kernel{TypeId::IQ4_NL, CpuIsa::Avx2,   vec_dot_iq4_nl_avx2},
    Kernel{TypeId::Q2_K,   CpuIsa::Avx2,   vec_dot_q2_k_avx2},
    Kernel{TypeId::Q3_K,   CpuIsa::Avx2,   vec_dot_q3_k_avx2},
    Kernel{TypeId::Q4_K,   CpuIsa::Avx2,   vec_dot_q4_k_avx2},
    Kernel{TypeId::Q5_K,   CpuIsa::Avx2,   vec_dot_q5_k_avx2},
    Kernel{TypeId::Q6_K,   CpuIsa::Avx2,   vec_dot_q6_k_avx2},
    Kernel{TypeId::IQ4_XS, CpuIsa::Avx2,   vec_dot_iq4_xs_avx2},
    Kernel{TypeId::TQ1_0,  CpuIsa::Avx2,   vec_dot_tq1_0_avx2},
    Kernel{TypeId::TQ2_0,  CpuIsa::Avx2,   vec_dot_tq2_0_avx2},
    Kernel{TypeId::MXFP4,  CpuIsa::Avx2,   vec_dot_mxfp4_avx2},
    Kernel{TypeId::IQ2_XXS, CpuIsa::Avx2,  vec_dot_iq2_xxs_avx2},
    Kernel{TypeId::IQ2_XS, CpuIsa::Avx2,   vec_dot_iq2_xs_avx2},
    Kernel{TypeId::IQ2_S,  CpuIsa::Avx2,   vec_dot_iq2_s_avx2},
    Kernel{TypeId::IQ3_XXS, CpuIsa::Avx2,  vec_dot_iq3_xxs_avx2},
    Kernel{TypeId::IQ3_S,  CpuIsa::Avx2,   vec_dot_iq3_s_avx2},
    Kernel{TypeId::IQ1_S,  CpuIsa::Avx2,   vec_dot_iq1_s_avx2},
    Kernel{TypeId::IQ1_M,  CpuIsa::Avx2,   vec_dot_iq1_m_avx2},
    Kernel{TypeId::Q4_0,   CpuIsa::Avx512, vec_dot_q4_0_avx512},
    Kernel{TypeId::Q8_0,   CpuIsa::Avx512, vec_dot_q8_0_avx512},
    Kernel{TypeId::Q4_K,   CpuIsa::Avx512, vec_dot_q4_k_avx512},
    Kernel{TypeId::Q6_K,   CpuIsa::Avx512, vec_dot_q6_k_avx512},
};
// clang-format on

quant::VecDotFn own_kernel(TypeId type, CpuIsa isa) {
    for (const Kernel& k : kKernels) {
        if (k.type == type && k.isa == isa) return k.fn;
    }
    return nullptr;
}

bool cpu_supports(CpuIsa isa) {
    switch (isa) {
        case CpuIsa::Scalar: return true;
        case CpuIsa::Avx2: return cpu_features().has_avx2_kernels();
        case CpuIsa::Avx512: return cpu_features().has_avx512_kernels();
    }
    return false;
}

CpuIsa resolve_isa() {
    const char* env = std::getenv("DESKSIDE_CPU_ISA");
    if (env == nullptr || *env == '\0') return detected_isa();
    return isa_from_setting(env);
}

}  // namespace

std::string_view isa_name(CpuIsa isa) {
    switch (isa) {
        case CpuIsa::Scalar: return "scalar";
        case CpuIsa::Avx2: return "avx2";
        case CpuIsa::Avx512: return "avx512";
    }
    return "?";
}

CpuIsa isa_from_setting(std::string_view value) {
    CpuIsa wanted;
    if (value == "scalar") {
        wanted = CpuIsa::Scalar;
    } else if (value == "avx2") {
        wanted = CpuIsa::Avx2;
    } else if (value == "avx512") {
        wanted = CpuIsa::Avx512;
    } else {
        throw std::runtime_error("DESKSIDE_CPU_ISA=" + std::string(value) + ": expected scalar, avx2 or avx512");
    }
    if (!cpu_supports(wanted)) {
        throw std::runtime_error("DESKSIDE_CPU_ISA=" + std::string(value) + ": this CPU (or its OS) does not support " +
                                 std::string(isa_name(wanted)) + "; the best it supports is " +
                                 std::string(isa_name(detected_isa())));
    }
    return wanted;
}

CpuIsa detected_isa() {
    if (cpu_supports(CpuIsa::Avx512)) return CpuIsa::Avx512;
    if (cpu_supports(CpuIsa::Avx2)) return CpuIsa::Avx2;
    return CpuIsa::Scalar;
}

CpuIsa selected_isa() {
    static const CpuIsa isa = resolve_isa();
    return isa;
}

bool has_kernel(TypeId weight_type, CpuIsa isa) { return own_kernel(weight_type, isa) != nullptr; }

quant::VecDotFn vec_dot_for(TypeId weight_type, CpuIsa isa) {
    const quant::QuantTraits* traits = quant::quant_traits(weight_type);
    if (traits == nullptr) return nullptr;
    // An AVX-512 machine also runs the AVX2 kernels, so fall back one level at a time.
    for (CpuIsa level : {CpuIsa::Avx512, CpuIsa::Avx2}) {
        if (static_cast<int>(level) > static_cast<int>(isa)) continue;
        if (quant::VecDotFn fn = own_kernel(weight_type, level)) return fn;
    }
    return traits->vec_dot;
}

quant::VecDotFn best_vec_dot(TypeId weight_type) { return vec_dot_for(weight_type, selected_isa()); }

}  // namespace deskside::backends::cpu
