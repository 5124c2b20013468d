#version 450
// Element-wise ops on F32 tensors with row strides: y = a OP b (b may be one row, broadcast over
// a's rows: b_stride = 0), or y = f(x) for the unary variants. One thread per element; thread i
// handles row i / ne0, column i % ne0. Variants (eltwise.variants): OP_ADD, OP_MUL (binary),
// OP_SCALE, OP_SILU, OP_GELU (unary; OP_SCALE uses p.scalar). With EXACT (devices with
// shaderFloat64) silu takes libm's expf (cpu_math.glsl) and gives the CPU backend's bits.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "cpu_math.glsl"

layout(local_size_x_id = 0) in;

#if defined(OP_ADD) || defined(OP_MUL)
#define BINARY 1
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
layout(binding = 2, std430) writeonly buffer Y { float y[]; };
#else
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 1, std430) writeonly buffer Y { float y[]; };
#endif
#if defined(OP_GELU)
#include "act_quant.glsl"
// backends/gelu_table.h's table (the CPU backend's): GELU of every F16 input, rounded to F16.
layout(binding = 2, std430) readonly buffer GeluTable { float gelu_table[]; };
#endif

// Offsets and strides in elements, relative to each bound range.
layout(push_constant) uniform Params {
    uint ne0;
    uint ne1;
    uint a_offset;
    uint a_stride;
    uint b_offset;
    uint b_stride;  // 0: b is one row broadcast over a's rows
    uint y_offset;
    uint y_stride;
    float scalar;
} p;

#if defined(OP_GELU)
// ref: Hendrycks & Gimpel, arXiv:1606.08415 (tanh approximation). As the CPU backend (and
// llama.cpp's): x rounded to F16 indexes a table of F16-rounded values; |x| >= 10 saturates.
float gelu(float v) {
    if (v <= -10.0) return 0.0;
    if (v >= 10.0) return v;
    return gelu_table[f32_to_f16_bits(v)];
}
#endif

void main() {
    uint i = group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.ne0 * p.ne1) return;
    uint row = i / p.ne0;
    uint col = i - row * p.ne0;
    float va = a[p.a_offset + row * p.a_stride + col];
#ifdef BINARY
    float vb = b[p.b_offset + row * p.b_stride + col];
#endif
    float r;
#if defined(OP_ADD)
    r = va + vb;
#elif defined(OP_MUL)
    r = va * vb;
#elif defined(OP_SCALE)
    r = va * p.scalar;
#elif defined(OP_SILU) && defined(EXACT)
    precise float denominator = 1.0 + cpu_expf(-va);
    r = va / denominator;
#elif defined(OP_SILU)
    r = va / (1.0 + exp(-va));
#elif defined(OP_GELU)
    r = gelu(va);
#else
#error "eltwise.comp: define one OP_*"
#endif
    y[p.y_offset + row * p.y_stride + col] = r;
}
