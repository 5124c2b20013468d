// The inner loops of CPU attention (ops_attention.cpp), a portable version and an AVX2 + FMA +
// F16C one (ops_attention_avx2.cpp) that give the same bits. Private to backends/cpu.
//
// Both follow llama.cpp's CPU flash attention on the machine that made ../shared/reference
// (AVX-512, so 16-lane vectors and steps of 64 elements), because a last-bit difference in a
// score or in the F16 accumulator is what moves the logits (docs/ENGINE.md, "Matching
// llama.cpp's logits").
#pragma once

#include <cstdint>

#include "backends/cpu/dot_kernels.h"

namespace deskside::backends::cpu {

// Elements per step of llama.cpp's F16 kernels there: 4 accumulators of 16 lanes.
inline constexpr int64_t kAttnF16Step = 64;

// q . k over F16 rows in the order of ggml_vec_dot_f16 with 16-lane vectors: four FMA
// accumulators over steps of 64, folded (0+2, 1+3, then 0+1), reduced as _mm512_reduce_add_ps
// does (upper + lower 256, upper + lower 128, then (0+2) + (1+3)); the n % 64 tail is summed in
// double, one float product at a time.
float attn_dot_f16(int64_t n, const uint16_t* k, const uint16_t* q);
float attn_dot_f16_avx2(int64_t n, const uint16_t* k, const uint16_t* q);

// acc[d] = acc[d] * scale, rounded to F16 when `f16` (the F16 accumulator llama.cpp keeps for
// an F16 V cache).
void attn_scale(float* acc, int64_t n, float scale, bool f16);
void attn_scale_avx2(float* acc, int64_t n, float scale, bool f16);

// acc[d] = fma(v[d], w, acc[d]), rounded to F16 when `f16`. llama.cpp fuses this in its SIMD
// steps, and its scalar tail (`y + x * v`) is contracted to an FMA too, because it is C++
// compiled for the host CPU (GCC contracts by default outside ISO C).
void attn_accumulate(float* acc, const float* v, float w, int64_t n, bool f16);
void attn_accumulate_avx2(float* acc, const float* v, float w, int64_t n, bool f16);

// dst[d] = src[d] widened from F16 (exact), for an F16 V row.
void attn_f16_to_f32(const uint16_t* src, float* dst, int64_t n);
void attn_f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n);

// The four loops at an instruction-set level: the AVX2 ones from CpuIsa::Avx2 up, the portable
// ones at CpuIsa::Scalar (what DESKSIDE_CPU_ISA=scalar runs, through selected_isa()).
struct AttnKernels {
    float (*dot_f16)(int64_t, const uint16_t*, const uint16_t*);
    void (*scale)(float*, int64_t, float, bool);
    void (*accumulate)(float*, const float*, float, int64_t, bool);
    void (*widen_f16)(const uint16_t*, float*, int64_t);
};
AttnKernels attention_kernels(CpuIsa isa);

}  // namespace deskside::backends::cpu
