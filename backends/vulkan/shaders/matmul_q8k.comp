#version 450
// y = W x with integer dot products for the K-quants and IQ4_XS, whose activations the CPU
// backend (and llama.cpp) quantizes to Q8_K: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS. W [k, n_rows]
// (k a multiple of 256), x [k, n_cols] quantized, y [n_rows, n_cols] F32.
//
// matmul_q8.comp's layout and invariance argument, with 256-element activation blocks quantized
// once per matmul by matmul_act_quant.comp (its first element of largest magnitude, the scales
// with act_quant.glsl's exact divisions, then the levels, as on the CPU) into a scratch buffer of
// 65 words per block (64 words of levels, then d as float bits). Lane l multiplies units (32
// elements) l, l + 32, ... of its row: per 16-element half an exact integer dot, and in float
// (d_w * d_x) * float(sum_h scale_h * dot_h) - (dmin_w * d_x) * float(sum_h min_h * sum_h(x)),
// llama.cpp's formula per unit instead of per super-block (the same terms, rounded per unit).
// Integer sums: OpSDotAccSatKHR with USE_INT_DOT (see matmul_q8.comp), plain multiply-adds
// otherwise, the same integers either way.
#extension GL_GOOGLE_include_directive : require
#if defined(USE_INT_DOT)
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4453)
int sdot_acc_sat(int a, int b, int acc, spirv_literal int packed_format);
#endif

layout(constant_id = 0) const uint ROWS = 4;  // output rows per workgroup
layout(constant_id = 1) const uint COLS = 1;  // activation columns per workgroup
layout(local_size_x = 32, local_size_y_id = 0, local_size_z = 1) in;

#include "common.glsl"
#include "dequant.glsl"
#include "weight_levels.glsl"

layout(binding = 1, std430) readonly buffer QuantizedActivations { uint xq[]; };
layout(binding = 2, std430) writeonly buffer Outputs { float y[]; };

// As matmul.comp's (vk_matmul.cpp fills all three kernels' with one struct).
layout(push_constant) uniform Params {
    uint k;
    uint n_rows;
    uint n_cols;
    uint w_offset;  // bytes
    uint w_stride;  // bytes
    uint x_offset;  // word of column 0's first block in the quantized activations
    uint x_stride;  // words between quantized columns
    uint y_offset;
    uint y_stride;
} p;

const uint kLanes = 32;
const uint kQ8KWords = 65;  // words per quantized 256-element block (matmul_act_quant.comp)

shared float lane_sums[ROWS][COLS][kLanes];

// Sum of a[i] * b[i] over the signed bytes of words first .. first + 3, plus acc.
int dot4_words(uint a[8], uint b[8], uint first, int acc) {
    for (uint i = first; i < first + 4u; ++i) {
#if defined(USE_INT_DOT)
        acc = sdot_acc_sat(int(a[i]), int(b[i]), acc, 0);
#else
        for (int byte = 0; byte < 32; byte += 8) acc += bitfieldExtract(int(a[i]), byte, 8) * bitfieldExtract(int(b[i]), byte, 8);
#endif
    }
    return acc;
}

void main() {
    const uint row_tiles = (p.n_rows + ROWS - 1u) / ROWS;
    const uint tile = group_index();
    if (tile >= row_tiles * ((p.n_cols + COLS - 1u) / COLS)) return;  // the whole workgroup
    const uint lane = gl_LocalInvocationID.x;
    const uint tile_row = gl_LocalInvocationID.y;
    const uint row = (tile % row_tiles) * ROWS + tile_row;
    const uint col0 = (tile / row_tiles) * COLS;
    const uint row_addr = p.w_offset + row * p.w_stride;
    const uint n_units = p.k / kUnit;

    precise float acc[COLS];
    for (uint c = 0u; c < COLS; ++c) acc[c] = 0.0;

    const uint ones[8] = uint[8](0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u,
                                 0x01010101u, 0x01010101u);
    if (row < p.n_rows) {
        for (uint unit = lane; unit < n_units; unit += kLanes) {
            uint w[8];
            int scale[2], minv[2];
            float d, dmin;
            weight_levels_k(row_addr, unit, w, scale, minv, d, dmin);
            for (uint c = 0u; c < COLS; ++c) {
                if (col0 + c >= p.n_cols) break;
                const uint block_first = p.x_offset + (col0 + c) * p.x_stride + (unit / 8u) * kQ8KWords;
                uint xl[8];
                for (uint i = 0u; i < 8u; ++i) xl[i] = xq[block_first + (unit % 8u) * 8u + i];
                const float dx = uintBitsToFloat(xq[block_first + 64u]);
                const int isum = scale[0] * dot4_words(w, xl, 0u, 0) + scale[1] * dot4_words(w, xl, 4u, 0);
                precise float term = (d * dx) * float(isum);
#if defined(TYPE_Q2_K) || defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
                const int imin = minv[0] * dot4_words(ones, xl, 0u, 0) + minv[1] * dot4_words(ones, xl, 4u, 0);
                precise float with_min = term - (dmin * dx) * float(imin);
                acc[c] = acc[c] + with_min;
#else
                acc[c] = acc[c] + term;
#endif
            }
        }
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
