// The scalar reference functions behind quant_traits(), one set per type.
//
// Private to quant/ and its tests: the rest of deskside reaches these through the traits table
// (quant/quant.h). They are split by family into ref_*.cpp files; each follows llama.cpp's
// reference quantizer step by step so that our quantized tensors equal its byte for byte, and
// each dot computes integer sums inside a block before scaling, as llama.cpp's CPU backend does.
// All take n = number of elements, a multiple of the type's block size.
#pragma once

#include <cstdint>

namespace deskside::quant::ref {

// Plain floats (ref_float.cpp).
void to_float_f32(const void* src, float* dst, int64_t n);
void from_float_f32(const float* src, void* dst, int64_t n);
float vec_dot_f32(int64_t n, const void* w, const void* a);
void to_float_f16(const void* src, float* dst, int64_t n);
void from_float_f16(const float* src, void* dst, int64_t n);
float vec_dot_f16(int64_t n, const void* w, const void* a);
void to_float_bf16(const void* src, float* dst, int64_t n);
void from_float_bf16(const float* src, void* dst, int64_t n);
float vec_dot_bf16(int64_t n, const void* w, const void* a);

// 32-element blocks (ref_legacy.cpp). Dots take Q8_0 activations, or Q8_1 for Q4_1/Q5_1.
void to_float_q4_0(const void* src, float* dst, int64_t n);
void from_float_q4_0(const float* src, void* dst, int64_t n);
float vec_dot_q4_0(int64_t n, const void* w, const void* a);
void to_float_q4_1(const void* src, float* dst, int64_t n);
void from_float_q4_1(const float* src, void* dst, int64_t n);
float vec_dot_q4_1(int64_t n, const void* w, const void* a);
void to_float_q5_0(const void* src, float* dst, int64_t n);
void from_float_q5_0(const float* src, void* dst, int64_t n);
float vec_dot_q5_0(int64_t n, const void* w, const void* a);
void to_float_q5_1(const void* src, float* dst, int64_t n);
void from_float_q5_1(const float* src, void* dst, int64_t n);
float vec_dot_q5_1(int64_t n, const void* w, const void* a);
void to_float_q8_0(const void* src, float* dst, int64_t n);
void from_float_q8_0(const float* src, void* dst, int64_t n);
float vec_dot_q8_0(int64_t n, const void* w, const void* a);
void to_float_q8_1(const void* src, float* dst, int64_t n);
void from_float_q8_1(const float* src, void* dst, int64_t n);
float vec_dot_q8_1(int64_t n, const void* w, const void* a);

// 256-element super-blocks (ref_q2_q3_k.cpp, ref_q4_q5_k.cpp, ref_q6_q8_k.cpp); dots take Q8_K.
void to_float_q2_k(const void* src, float* dst, int64_t n);
void from_float_q2_k(const float* src, void* dst, int64_t n);
float vec_dot_q2_k(int64_t n, const void* w, const void* a);
void to_float_q3_k(const void* src, float* dst, int64_t n);
void from_float_q3_k(const float* src, void* dst, int64_t n);
float vec_dot_q3_k(int64_t n, const void* w, const void* a);
void to_float_q4_k(const void* src, float* dst, int64_t n);
void from_float_q4_k(const float* src, void* dst, int64_t n);
float vec_dot_q4_k(int64_t n, const void* w, const void* a);
void to_float_q5_k(const void* src, float* dst, int64_t n);
void from_float_q5_k(const float* src, void* dst, int64_t n);
float vec_dot_q5_k(int64_t n, const void* w, const void* a);
void to_float_q6_k(const void* src, float* dst, int64_t n);
void from_float_q6_k(const float* src, void* dst, int64_t n);
float vec_dot_q6_k(int64_t n, const void* w, const void* a);
void to_float_q8_k(const void* src, float* dst, int64_t n);
void from_float_q8_k(const float* src, void* dst, int64_t n);
float vec_dot_q8_k(int64_t n, const void* w, const void* a);

// Non-linear 4-bit (ref_iq4.cpp): dequantize and dot; the quantizer is in quantize_weighted.cpp.
void to_float_iq4_nl(const void* src, float* dst, int64_t n);
float vec_dot_iq4_nl(int64_t n, const void* w, const void* a);  // Q8_0 activations
void to_float_iq4_xs(const void* src, float* dst, int64_t n);
float vec_dot_iq4_xs(int64_t n, const void* w, const void* a);  // Q8_K activations

// Low-bit i-quants, codebook-based (ref_iq_lowbit.cpp): dequantize and dot only, Q8_K activations.
void to_float_iq2_xxs(const void* src, float* dst, int64_t n);
float vec_dot_iq2_xxs(int64_t n, const void* w, const void* a);
void to_float_iq2_xs(const void* src, float* dst, int64_t n);
float vec_dot_iq2_xs(int64_t n, const void* w, const void* a);
void to_float_iq2_s(const void* src, float* dst, int64_t n);
float vec_dot_iq2_s(int64_t n, const void* w, const void* a);
void to_float_iq3_xxs(const void* src, float* dst, int64_t n);
float vec_dot_iq3_xxs(int64_t n, const void* w, const void* a);
void to_float_iq3_s(const void* src, float* dst, int64_t n);
float vec_dot_iq3_s(int64_t n, const void* w, const void* a);
void to_float_iq1_s(const void* src, float* dst, int64_t n);
float vec_dot_iq1_s(int64_t n, const void* w, const void* a);
void to_float_iq1_m(const void* src, float* dst, int64_t n);
float vec_dot_iq1_m(int64_t n, const void* w, const void* a);

// Ternary and microscaling FP4 (ref_ternary_mxfp4.cpp). TQ1_0 / TQ2_0 dots take Q8_K
// activations, MXFP4 takes Q8_0.
void to_float_tq1_0(const void* src, float* dst, int64_t n);
void from_float_tq1_0(const float* src, void* dst, int64_t n);
float vec_dot_tq1_0(int64_t n, const void* w, const void* a);
void to_float_tq2_0(const void* src, float* dst, int64_t n);
void from_float_tq2_0(const float* src, void* dst, int64_t n);
float vec_dot_tq2_0(int64_t n, const void* w, const void* a);
void to_float_mxfp4(const void* src, float* dst, int64_t n);
void from_float_mxfp4(const float* src, void* dst, int64_t n);
float vec_dot_mxfp4(int64_t n, const void* w, const void* a);

}  // namespace deskside::quant::ref
