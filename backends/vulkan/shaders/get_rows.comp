#version 450
// dst[:, i] = table row ids[i] dequantized to F32, for one table type (TYPE_<NAME>, see
// dequant.glsl). Each invocation writes one 32-element unit of one selected row (workgroups of 64 units), bit-identical
// to quant::to_float.
//
// A table larger than one storage-buffer binding is bound in windows of rows [row_first,
// row_first + n_rows); the host dispatches once per window that holds a requested row, and an
// id outside the current window is skipped here (another dispatch writes it).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

#include "common.glsl"
// The low-bit i-quants' codebook (iq_lowbit.glsl), after the three buffers below.
#define IQ_CODEBOOK_BINDING 3
#include "dequant.glsl"

layout(binding = 1, std430) readonly buffer Ids { int ids[]; };
layout(binding = 2, std430) writeonly buffer Outputs { float dst[]; };

layout(push_constant) uniform Params {
    uint ne0;         // elements per row
    uint n_ids;       // ids (output columns) of this dispatch
    uint ids_offset;  // element of the first id in the ids binding
    uint row_first;   // first table row of the bound window
    uint n_rows;      // table rows in the window
    uint t_offset;    // byte of row row_first in the table binding
    uint t_stride;    // bytes between table rows
    uint dst_offset;  // element of output (0, 0)
    uint dst_stride;  // elements between output columns
} p;

void main() {
    // Workgroup g covers 64 units of output column g / unit_groups.
    const uint unit_groups = (p.ne0 + 64u * kUnit - 1u) / (64u * kUnit);
    const uint g = group_index();
    const uint unit = (g % unit_groups) * 64u + gl_LocalInvocationID.x;
    const uint i = g / unit_groups;
    if (i >= p.n_ids || unit * kUnit >= p.ne0) return;
    const uint row = uint(ids[p.ids_offset + i]) - p.row_first;  // wraps above n_rows if below the window
    if (row >= p.n_rows) return;
    const uint n_valid = min(kUnit, p.ne0 - unit * kUnit);
    float w[kUnit];
    dequant_unit(p.t_offset + row * p.t_stride, unit, n_valid, w);
    const uint out_first = p.dst_offset + i * p.dst_stride + unit * kUnit;
    for (uint j = 0u; j < kUnit; ++j) {
        if (j < n_valid) dst[out_first + j] = w[j];
    }
}
