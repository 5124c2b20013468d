#version 450
// Rotary position embedding, in place on x [n_head * head_dim, n_tokens] (F32). One thread per
// (token, dimension pair i), rotating that pair in every head.
//
// The rotations come from the host: rotations[2 (pos * half + i)] = cos, [.. + 1] = sin for every
// position below n_ctx, computed once per set of rope parameters by backends/rope_angles.h, the
// CPU backend's own code (libm's cosf/sinf, the float angle recurrence, linear / llama3 / YaRN
// scaling, freq_factors). A device's cos/sin differ from libm's by ulps, which quantized models
// amplify (docs/VULKAN.md, "Bit-exact ops"); the table costs n_ctx * n_rot * 4 bytes of device
// memory. Token t's position is positions[pos_offset + t] (the step's I32 argument tensor). The rotation is the CPU's expression, one FMA
// over a rounded product: a*cos - b*sin = fma(a, cos, -(b*sin)), a*sin + b*cos = fma(a, sin, b*cos),
// with cpu_math.glsl's cpu_fma (one rounding, in double in the _exact variant).
// ref: RoFormer (arXiv:2104.09864)
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "cpu_math.glsl"

layout(local_size_x_id = 0) in;

layout(binding = 0, std430) buffer X { float x[]; };
layout(binding = 1, std430) readonly buffer Rotations { float rotations[]; };
layout(binding = 2, std430) readonly buffer Positions { int positions[]; };

layout(push_constant) uniform Params {
    uint n_tokens;
    uint x_offset;  // elements
    uint x_stride;  // elements
    uint n_head;
    uint head_dim;
    uint n_rot;
    uint neox;
    uint pos_offset;  // elements
} p;

void main() {
    uint half_rot = p.n_rot / 2;
    uint id = group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (id >= p.n_tokens * half_rot) return;
    uint t = id / half_rot;
    uint i = id - t * half_rot;
    uint r = uint(positions[p.pos_offset + t]) * half_rot + i;
    float c = rotations[2u * r], s = rotations[2u * r + 1u];

    uint i0 = p.neox != 0 ? i : 2 * i;
    uint i1 = p.neox != 0 ? i + half_rot : 2 * i + 1;
    uint base = p.x_offset + t * p.x_stride;
    for (uint h = 0; h < p.n_head; ++h) {
        uint o = base + h * p.head_dim;
        float a = x[o + i0], b = x[o + i1];
        precise float bs = b * s;
        precise float bc = b * c;
        precise float r0 = cpu_fma(a, c, -bs);
        precise float r1 = cpu_fma(a, s, bc);
        x[o + i0] = r0;
        x[o + i1] = r1;
    }
}
