#version 450
// y = W x for one weight type (TYPE_<NAME>, see dequant.glsl): W [k, n_rows] (row r of W is
// output r), x [k, n_cols] F32, y [n_rows, n_cols] F32.
//
// One kernel for both the decode matrix-vector product (COLS = 1) and the prompt matrix-matrix
// product (COLS > 1), one variant per weight type (matmul_q4_0, ...). A workgroup computes a tile
// of ROWS output rows x COLS activation columns; its threads are 32 lanes per row. The activation
// tile of the current 1024-element step of k goes through shared memory (shared by every row of
// the tile), and each weight unit is dequantized once and used for every column.
//
// Batch invariance (DESIGN.md key decision 5) by construction: an output y[r, c] is always
// computed by the same arithmetic, whatever COLS, ROWS or the number of columns. Lane l adds the
// products of units l, l + 32, l + 64, ... (32 elements each, in order) into its accumulator,
// then the 32 lane sums are added by the same fixed pairwise tree. The accumulators are `precise`
// (SPIR-V NoContraction): each product and sum is rounded on its own, so no driver may fuse them
// into an fma in one shader and not in another. (fma() would not do: SPIR-V promises invariance
// only for an Fma decorated NoContraction, which glslang does not emit.) Activations are not
// quantized; for F16 and BF16 weights they are rounded to F16 / BF16 as the CPU does
// (activation_value), so each output is the exact dot of that x with quant::to_float(W) up to the
// float rounding of that fixed order.
//
// F32, F16 and BF16 weights (the ones vk_matmul.cpp sends here; the quantized variants serve
// tests of the dequantizers) go another way: the CPU backend's AVX2 order, for its bits
// (docs/VULKAN.md, "Bit-exact ops"; backends/cpu/dot_float_avx2.cpp). Lane l (of 32) keeps the
// FMA chain of accumulator l / 8, float lane l % 8: elements i + l for i = 0, 32, 64, ...; lanes
// 0-7 continue over the remaining whole 8-element steps; the 4 accumulators are added
// (0+1)+(2+3), the 8 float lanes meet in the CPU's horizontal sum ((0+4)+(2+6)) + ((1+5)+(3+7)),
// and the last k % 8 products are FMAs onto that sum in order.
//
// MATMUL_ID (the matmul_id_* twins, for Backend::matmul_id): W stacks experts; a workgroup is
// one output column (COLS = 1) and reads W's rows at that column's expert (binding 3, the ids),
// with the same arithmetic per output as above, so a row gets matmul's bits for its expert.
#extension GL_GOOGLE_include_directive : require

// The tile shape (specialization constants; vk_matmul.cpp picks one per dispatch).
layout(constant_id = 0) const uint ROWS = 4;  // output rows per workgroup
layout(constant_id = 1) const uint COLS = 1;  // activation columns per workgroup
layout(local_size_x = 32, local_size_y_id = 0, local_size_z = 1) in;

#include "common.glsl"
#include "cpu_math.glsl"
#include "dequant.glsl"
#include "act_quant.glsl"

layout(binding = 1, std430) readonly buffer Activations { float x[]; };
layout(binding = 2, std430) writeonly buffer Outputs { float y[]; };
#if defined(MATMUL_ID)
layout(binding = 3, std430) readonly buffer ExpertIds { uint expert_ids[]; };
#endif

// Offsets and strides are relative to the bound ranges: bytes for the weights (the binding
// starts at an aligned offset at or before row 0), elements for x and y.
layout(push_constant) uniform Params {
    uint k;         // elements per weight row and per activation column
    uint n_rows;    // weight rows (outputs) of this dispatch
    uint n_cols;    // activation columns of this dispatch
    uint w_offset;  // byte of weight row 0
    uint w_stride;  // bytes between weight rows
    uint x_offset;  // element of activation column 0
    uint x_stride;  // elements between activation columns
    uint y_offset;  // element of output (row 0, column 0)
    uint y_stride;  // elements between output columns
#if defined(MATMUL_ID)
    uint chain_rows;  // unused (matmul_q8*.comp's; vk_matmul.cpp fills all three with one struct)
    // Backend::matmul_id (COLS = 1): the experts [expert_first, expert_first + n_experts) are
    // bound, expert_stride bytes apart; column j (output row j of y) is slot j of the ids and
    // reads activation column j / x_div (x_div = n_used when x has one row per token, else 1).
    uint expert_stride;
    uint expert_first;
    uint n_experts;
    uint ids_offset;  // word of column 0's expert id
    uint x_div;
#endif
} p;

const uint kLanes = 32;
const uint kStep = kLanes * kUnit;  // elements of k consumed per pass over the lanes

// An activation as the CPU backend and llama.cpp dot it with this weight type: converted to the
// weight's vec_dot_type first, so F16 weights meet x rounded to F16 and BF16 weights x rounded to
// BF16, both to nearest even with integer operations (packHalf2x16's rounding is left to the
// driver). F32 weights use x as it is.
// ref: quant/float16.h (fp32_to_fp16, fp32_to_bf16)
float activation_value(float v) {
#if defined(TYPE_F16)
    return unpackHalf2x16(f32_to_f16_bits(v)).x;
#elif defined(TYPE_BF16)
    const uint b = floatBitsToUint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return v;  // NaN stays NaN
    return uintBitsToFloat(((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16) << 16);
#else
    return v;
#endif
}

#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
shared float lane_sums[ROWS][COLS][kLanes];

float weight_at(uint row_addr, uint i) {
#if defined(TYPE_F32)
    return uintBitsToFloat(load_u32(row_addr + 4u * i));
#elif defined(TYPE_F16)
    return load_f16(row_addr + 2u * i);
#else
    return uintBitsToFloat(load_u16(row_addr + 2u * i) << 16);
#endif
}

void main() {
    const uint row_tiles = (p.n_rows + ROWS - 1u) / ROWS;
    const uint tile = group_index();
    if (tile >= row_tiles * ((p.n_cols + COLS - 1u) / COLS)) return;  // the whole workgroup
    const uint lane = gl_LocalInvocationID.x;
    const uint tile_row = gl_LocalInvocationID.y;
    const uint row = (tile % row_tiles) * ROWS + tile_row;
    const uint col0 = (tile / row_tiles) * COLS;
#if defined(MATMUL_ID)
    // This column's expert, when this dispatch binds it (an id outside them, as one outside
    // [0, n_expert), leaves the column to another dispatch or unwritten: ids are not checked).
    const uint expert = expert_ids[p.ids_offset + col0] - p.expert_first;
    if (expert >= p.n_experts) return;  // the whole workgroup: COLS = 1
    const uint row_addr = p.w_offset + expert * p.expert_stride + row * p.w_stride;
    const uint x_col0 = col0 / p.x_div;
#else
    const uint row_addr = p.w_offset + row * p.w_stride;
    const uint x_col0 = col0;
#endif
    const uint whole32 = p.k / 32u * 32u, whole8 = p.k / 8u * 8u;

    precise float acc[COLS];
    for (uint c = 0u; c < COLS; ++c) acc[c] = 0.0;
    if (row < p.n_rows) {
        for (uint i = lane; i < whole32; i += 32u) {
            const float w = weight_at(row_addr, i);
            for (uint c = 0u; c < COLS; ++c) {
                if (col0 + c < p.n_cols) acc[c] = cpu_fma(w, activation_value(x[p.x_offset + (x_col0 + c) * p.x_stride + i]), acc[c]);
            }
        }
        if (lane < 8u) {
            for (uint i = whole32 + lane; i < whole8; i += 8u) {
                const float w = weight_at(row_addr, i);
                for (uint c = 0u; c < COLS; ++c) {
                    if (col0 + c < p.n_cols) acc[c] = cpu_fma(w, activation_value(x[p.x_offset + (x_col0 + c) * p.x_stride + i]), acc[c]);
                }
            }
        }
    }
    for (uint c = 0u; c < COLS; ++c) lane_sums[tile_row][c][lane] = acc[c];
    barrier();
    if (lane < COLS && row < p.n_rows && col0 + lane < p.n_cols) {
        const uint c = lane;
        precise float v[8];
        for (uint l = 0u; l < 8u; ++l) {
            precise float v01 = lane_sums[tile_row][c][l] + lane_sums[tile_row][c][8u + l];
            precise float v23 = lane_sums[tile_row][c][16u + l] + lane_sums[tile_row][c][24u + l];
            v[l] = v01 + v23;
        }
        precise float r = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
        for (uint i = whole8; i < p.k; ++i) r = cpu_fma(weight_at(row_addr, i), activation_value(x[p.x_offset + (x_col0 + c) * p.x_stride + i]), r);
        y[p.y_offset + (col0 + c) * p.y_stride + row] = r;
    }
}
#else
#if defined(MATMUL_ID)
#error "matmul.comp: MATMUL_ID is built for F32, F16 and BF16 weights only"
#endif
// Activations of the current step, one padded row per lane's unit (no bank conflicts).
shared float xs[COLS][kLanes][kUnit + 1];
shared float lane_sums[ROWS][COLS][kLanes];

void main() {
    // Tiles in column-major order: consecutive workgroups share the activation columns.
    const uint row_tiles = (p.n_rows + ROWS - 1u) / ROWS;
    const uint tile = group_index();
    if (tile >= row_tiles * ((p.n_cols + COLS - 1u) / COLS)) return;  // the whole workgroup
    const uint lane = gl_LocalInvocationID.x;
    const uint tile_row = gl_LocalInvocationID.y;
    const uint thread = tile_row * kLanes + lane;
    const uint row = (tile % row_tiles) * ROWS + tile_row;
    const uint col0 = (tile / row_tiles) * COLS;
    const uint row_addr = p.w_offset + row * p.w_stride;

    precise float acc[COLS];
    for (uint c = 0u; c < COLS; ++c) acc[c] = 0.0;

    for (uint step = 0u; step < p.k; step += kStep) {
        for (uint i = thread; i < COLS * kStep; i += ROWS * kLanes) {
            const uint c = i / kStep;
            const uint e = i % kStep;
            const bool inside = col0 + c < p.n_cols && step + e < p.k;
            xs[c][e / kUnit][e % kUnit] = activation_value(inside ? x[p.x_offset + (col0 + c) * p.x_stride + step + e] : 0.0);
        }
        barrier();
        const uint unit = step / kUnit + lane;
        if (row < p.n_rows && unit * kUnit < p.k) {
            const uint n_valid = min(kUnit, p.k - unit * kUnit);
            float w[kUnit];
            dequant_unit(row_addr, unit, n_valid, w);
            for (uint j = 0u; j < kUnit; ++j) {
                if (j < n_valid) {
                    for (uint c = 0u; c < COLS; ++c) acc[c] = acc[c] + w[j] * xs[c][lane][j];
                }
            }
        }
        barrier();
    }

    for (uint c = 0u; c < COLS; ++c) lane_sums[tile_row][c][lane] = acc[c];
    barrier();
    for (uint s = kLanes / 2u; s > 0u; s >>= 1) {
        if (lane < s) {
            for (uint c = 0u; c < COLS; ++c) lane_sums[tile_row][c][lane] += lane_sums[tile_row][c][lane + s];
        }
        barrier();
    }
    if (lane < COLS && row < p.n_rows && col0 + lane < p.n_cols) {
        y[p.y_offset + (col0 + lane) * p.y_stride + row] = lane_sums[tile_row][lane][0];
    }
}
#endif
