#version 450
// y = W x with integer dot products, for the weight types whose activations the CPU backend (and
// llama.cpp) quantizes to Q8_0 or Q8_1: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL. W [k, n_rows]
// (k a multiple of 32), x [k, n_cols] F32, y [n_rows, n_cols] F32.
//
// The activations arrive quantized: matmul_act_quant.comp ran once for the whole matmul (the
// CPU's bytes exactly, act_quant.glsl) and wrote each column's blocks into a scratch buffer, 9
// words per block (8 words of levels, then d's F16 bits with Q8_1's s in the high half). The
// workgroup layout is matmul.comp's (ROWS rows x 32 lanes, COLS activation columns per tile);
// lane l multiplies blocks l, l + 32, ... of its row with each column: an exact integer sum of
// 32 level products, scaled as in llama.cpp's vec_dot: (d_w * d_x) * float(sum) (+ m_w * s_x
// for Q4_1/Q5_1).
//
// The integer sums use OpSDotAccSatKHR (SPV_KHR_integer_dot_product, declared through
// GL_EXT_spirv_intrinsics because glslc has no GLSL name for it) in the variants built with
// USE_INT_DOT, for devices with shaderIntegerDotProduct, and plain multiply-adds otherwise. A sum
// of 32 products of bytes is at most 32 * 128 * 128 = 2^19, far from saturating, so both give the
// same integers and the same outputs bit for bit.
//
// Batch invariance as in matmul.comp: each lane adds its blocks' terms in order into a `precise`
// accumulator and the 32 lane sums meet in a fixed tree, whatever the tile shape or the number of
// columns. The tree stays in shared memory even where subgroup arithmetic exists: a subgroup
// reduction needs the lanes of one output row to form whole subgroups, which Vulkan does not
// promise for a 2-D workgroup, and it runs once per output (the cost is in the block loop).
#extension GL_GOOGLE_include_directive : require
#if defined(USE_INT_DOT)
#extension GL_EXT_spirv_intrinsics : require
// OpSDotAccSatKHR (4453) on 32-bit operands in PackedVectorFormat4x8Bit (0); capabilities
// DotProductKHR (6019) and DotProductInput4x8BitPackedKHR (6018).
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

// As matmul.comp's (vk_matmul.cpp fills both with one struct).
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
const uint kQ8Block = 32;  // activations per Q8_0 / Q8_1 block
const uint kQ8Words = 9;   // words per quantized block (matmul_act_quant.comp)

shared float lane_sums[ROWS][COLS][kLanes];

// Sum of the level products of the weights' block (8 words of signed bytes) and the activations'
// block at word xq_first.
int dot_levels(uint w[8], uint xq_first) {
    int sum = 0;
    for (uint i = 0u; i < 8u; ++i) {
#if defined(USE_INT_DOT)
        sum = sdot_acc_sat(int(w[i]), int(xq[xq_first + i]), sum, 0);
#else
        const int a = int(w[i]), b = int(xq[xq_first + i]);
        for (int byte = 0; byte < 32; byte += 8) sum += bitfieldExtract(a, byte, 8) * bitfieldExtract(b, byte, 8);
#endif
    }
    return sum;
}

void main() {
    // Tiles in column-major order: consecutive workgroups share the activation columns.
    const uint row_tiles = (p.n_rows + ROWS - 1u) / ROWS;
    const uint tile = group_index();
    if (tile >= row_tiles * ((p.n_cols + COLS - 1u) / COLS)) return;  // the whole workgroup
    const uint lane = gl_LocalInvocationID.x;
    const uint tile_row = gl_LocalInvocationID.y;
    const uint row = (tile % row_tiles) * ROWS + tile_row;
    const uint col0 = (tile / row_tiles) * COLS;
    const uint row_addr = p.w_offset + row * p.w_stride;
    const uint n_blocks = p.k / kQ8Block;

    precise float acc[COLS];
    for (uint c = 0u; c < COLS; ++c) acc[c] = 0.0;

    if (row < p.n_rows) {
        for (uint block = lane; block < n_blocks; block += kLanes) {
            uint w[8];
            float d, m;
            weight_levels(row_addr, block, w, d, m);
            for (uint c = 0u; c < COLS; ++c) {
                if (col0 + c >= p.n_cols) break;
                const uint xq_first = p.x_offset + (col0 + c) * p.x_stride + block * kQ8Words;
                const vec2 scales = unpackHalf2x16(xq[xq_first + 8u]);  // d_x, s_x
                precise float term = (d * scales.x) * float(dot_levels(w, xq_first));
#if defined(WEIGHT_HAS_MIN)
                precise float with_min = term + m * scales.y;
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
