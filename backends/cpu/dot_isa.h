// The SIMD vec_dot kernels, one declaration per (type, instruction set). Private to
// backends/cpu: callers go through best_vec_dot (dot_kernels.h), which only hands out a kernel
// the running CPU supports. Each has the signature of quant::VecDotFn; activations are in the
// weight type's vec_dot_type (see quant/quant.cpp).
#pragma once

#include <cstdint>

namespace deskside::backends::cpu {

// dot_float_avx2.cpp
float vec_dot_f32_avx2(int64_t n, const void* w, const void* a);
float vec_dot_f16_avx2(int64_t n, const void* w, const void* a);
float vec_dot_bf16_avx2(int64_t n, const void* w, const void* a);

// dot_legacy_avx2.cpp: 32-element blocks.
float vec_dot_q4_0_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q4_1_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q5_0_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q5_1_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q8_0_avx2(int64_t n, const void* w, const void* a);
float vec_dot_iq4_nl_avx2(int64_t n, const void* w, const void* a);

// dot_kquant_avx2.cpp: 256-element super-blocks against Q8_K.
float vec_dot_q2_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q3_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q4_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q5_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q6_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_iq4_xs_avx2(int64_t n, const void* w, const void* a);

// dot_iq_lowbit_avx2.cpp: the codebook i-quants against Q8_K.
float vec_dot_iq2_xxs_avx2(int64_t n, const void* w, const void* a);
float vec_dot_iq2_xs_avx2(int64_t n, const void* w, const void* a);
float vec_dot_iq2_s_avx2(int64_t n, const void* w, const void* a);
float vec_dot_iq3_xxs_avx2(int64_t n, const void* w, const void* a);
float vec_dot_iq3_s_avx2(int64_t n, const void* w, const void* a);
float vec_dot_iq1_s_avx2(int64_t n, const void* w, const void* a);
float vec_dot_iq1_m_avx2(int64_t n, const void* w, const void* a);

// dot_tq_mxfp4_avx2.cpp: ternary super-blocks against Q8_K, MXFP4 against Q8_0.
float vec_dot_tq1_0_avx2(int64_t n, const void* w, const void* a);
float vec_dot_tq2_0_avx2(int64_t n, const void* w, const void* a);
float vec_dot_mxfp4_avx2(int64_t n, const void* w, const void* a);

// dot_avx512.cpp: AVX-512 F/BW/VL + VNNI.
float vec_dot_q4_0_avx512(int64_t n, const void* w, const void* a);
float vec_dot_q8_0_avx512(int64_t n, const void* w, const void* a);
float vec_dot_q4_k_avx512(int64_t n, const void* w, const void* a);
float vec_dot_q6_k_avx512(int64_t n, const void* w, const void* a);

}  // namespace deskside::backends::cpu
