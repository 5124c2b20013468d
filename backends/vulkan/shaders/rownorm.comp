#version 450
// rms_norm of F32 rows, one workgroup per row. Thread t reduces elements t, t + WG, t + 2 WG, ... and the partial sums
// meet either in a fixed shared-memory tree or (USE_SUBGROUP, devices with subgroup arithmetic in
// compute) in subgroupAdd per subgroup, whose results are then added in subgroup
// order. Either way a row's result does not depend on the number of rows (batch invariance);
// the two may round differently, which is why vk_ops_norm_rope.cpp picks one per device and uses
// it for every row count. Variants: rownorm.variants.
//
// EXACT (devices with shaderFloat64): the CPU backend's arithmetic bit for bit instead, one
// thread walking the row in order: rms_norm sums the float-rounded squares in double (llama.cpp's
// order). A row of a few thousand
// elements costs one thread a few thousand adds, small beside the matmuls around it.
#extension GL_GOOGLE_include_directive : require
#if defined(USE_SUBGROUP)
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "cpu_math.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // a power of two

layout(binding = 0, std430) readonly buffer X { float x[]; };
layout(binding = 1, std430) readonly buffer W { float w[]; };
layout(binding = 2, std430) writeonly buffer Y { float y[]; };

// Offsets and strides in elements, relative to each bound range.
layout(push_constant) uniform Params {
    uint ne0;
    uint n_rows;
    uint x_offset;
    uint x_stride;
    uint w_offset;  // rms_norm: weight row; has_weight = 0 means no scaling
    uint has_weight;
    uint y_offset;
    uint y_stride;
    float eps;
} p;

shared float partial[WG];
#if defined(EXACT)
shared float row_scale;
#endif

#if defined(USE_SUBGROUP)
// Sum of every thread's `v`: one subgroup operation each, then the subgroups' results
// in subgroup order; the result is valid in every thread. The whole workgroup reduces one row,
// so how the driver groups invocations into subgroups does not matter.
float reduce_sum(float v) {
    const float s = subgroupAdd(v);
    if (subgroupElect()) partial[gl_SubgroupID] = s;
    barrier();
    float r = partial[0];
    for (uint i = 1u; i < gl_NumSubgroups; ++i) r += partial[i];
    barrier();
    return r;
}
#else
// Sum of every thread's `v` in a fixed order; the result is valid in every thread.
float reduce_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    partial[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    float r = partial[0];
    barrier();
    return r;
}
#endif

void main() {
    uint row = group_index();
    if (row >= p.n_rows) return;  // uniform per workgroup: the barriers stay in uniform control flow
    uint t = gl_LocalInvocationID.x;
    uint base = p.x_offset + row * p.x_stride;
#if defined(EXACT)
    if (t == 0u) {
        precise double sum = 0.0LF;
        for (uint i = 0u; i < p.ne0; ++i) {
            precise float sq = x[base + i] * x[base + i];
            sum += double(sq);
        }
        precise float mean = float(sum / double(p.ne0));
        row_scale = 1.0 / sqrt(mean + p.eps);
    }
    barrier();
    float s = row_scale;
#else
    float acc = 0.0;
    for (uint i = t; i < p.ne0; i += WG) acc += x[base + i] * x[base + i];
    float sum = reduce_sum(acc);
    float s = 1.0 / sqrt(sum / float(p.ne0) + p.eps);
#endif
    uint out_base = p.y_offset + row * p.y_stride;
    for (uint i = t; i < p.ne0; i += WG) {
        precise float v = x[base + i] * s;
        precise float vw = v * w[p.w_offset + i];
        y[out_base + i] = p.has_weight != 0 ? vw : v;
    }
}
