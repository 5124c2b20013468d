#version 450
// y = W x with integer dot products, for the weight types whose activations the CPU backend (and
// llama.cpp) quantizes to Q8_0 or Q8_1: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL. W [k, n_rows]
// (k a multiple of 32), x [k, n_cols] F32, y [n_rows, n_cols] F32.
//
// The activations arrive quantized: matmul_act_quant.comp ran once for the whole matmul (the
// CPU's bytes exactly, act_quant.glsl) and wrote each column's blocks into a scratch buffer, 9
// words per block (8 words of levels, then d's F16 bits with Q8_1's s in the high half). A
// workgroup is ROWS rows x 8 lanes and COLS (at most 8) activation columns per tile; the block
// sums of level products are exact integers, scaled as in llama.cpp's vec_dot: d_w * d_x times
// the sum (+ m_w * s_x for Q4_1/Q5_1).
//
// The integer sums use OpSDotAccSatKHR (SPV_KHR_integer_dot_product, declared through
// GL_EXT_spirv_intrinsics because glslc has no GLSL name for it) in the variants built with
// USE_INT_DOT, for devices with shaderIntegerDotProduct, and plain multiply-adds otherwise. A sum
// of 32 products of bytes is at most 32 * 128 * 128 = 2^19, far from saturating, so both give the
// same integers and the same outputs bit for bit.
//
// Summation order: the CPU backend's at its AVX2 level, so outputs are its bits (quantized models
// amplify last-bit differences; docs/VULKAN.md, "Bit-exact ops"). Rows below p.chain_rows are
// the ones the CPU keeps row-interleaved (backends/cpu/repack.h: Q4_0x8): one FMA chain over the
// blocks in order, acc = fma(d_w * d_x, float(block sum), acc), run by lane 0. The other rows
// follow the CPU's GGUF-layout vec_dot (backends/cpu/dot_legacy_avx2.cpp): lane j < 8 keeps the
// chain of int32 lane j (elements 4j .. 4j + 3 of every block), acc_j = fma(d_w * d_x,
// float(sum_j), acc_j), and the 8 chains meet in the CPU's horizontal sum ((0+4)+(2+6)) +
// ((1+5)+(3+7)); Q4_1/Q5_1 add their min terms as one more chain, offsets = fma(m_w, s_x,
// offsets), after it. Every order depends on the row alone, never on the tile or the batch.
//
// MATMUL_ID (the matmul_id_* twins, for Backend::matmul_id): W stacks experts; a workgroup is
// one output column (COLS = 1) and reads W's rows at that column's expert (binding 3, the ids),
// with the same arithmetic per output as above, so a row gets matmul's bits for its expert.
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
layout(local_size_x = 8, local_size_y_id = 0, local_size_z = 1) in;  // the CPU's 8 float lanes

#include "common.glsl"
#include "cpu_math.glsl"
#include "dequant.glsl"
#include "weight_levels.glsl"

layout(binding = 1, std430) readonly buffer QuantizedActivations { uint xq[]; };
layout(binding = 2, std430) writeonly buffer Outputs { float y[]; };
#if defined(MATMUL_ID)
layout(binding = 3, std430) readonly buffer ExpertIds { uint expert_ids[]; };
#endif

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
    uint chain_rows;  // rows [0, chain_rows) of this dispatch in the CPU's x8 order
#if defined(MATMUL_ID)
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

const uint kQ8Block = 32;  // activations per Q8_0 / Q8_1 block
const uint kQ8Words = 9;   // words per quantized block (matmul_act_quant.comp)

const uint kCpuLanes = 8;  // float lanes of the CPU's AVX2 accumulator

shared float lane_sums[ROWS][COLS][kCpuLanes];
shared float min_sums[ROWS][COLS];

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

// Sum of the level products of one word (4 elements) of the weights and of the activations.
int dot_word(uint w, uint x) {
#if defined(USE_INT_DOT)
    return sdot_acc_sat(int(w), int(x), 0, 0);
#else
    int sum = 0;
    for (int byte = 0; byte < 32; byte += 8) sum += bitfieldExtract(int(w), byte, 8) * bitfieldExtract(int(x), byte, 8);
    return sum;
#endif
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
    const uint n_blocks = p.k / kQ8Block;

    // x8 rows: one chain (lane 0); other rows: the CPU's 8 lane chains (lanes 0..7).
    const bool chain = row < p.chain_rows;
    const uint active_lanes = chain ? 1u : kCpuLanes;
    precise float acc[COLS];
    precise float offsets[COLS];
    for (uint c = 0u; c < COLS; ++c) {
        acc[c] = 0.0;
        offsets[c] = 0.0;
    }

    if (row < p.n_rows && lane < active_lanes) {
        for (uint block = 0u; block < n_blocks; ++block) {
            uint w[8];
            float d, m;
            weight_levels(row_addr, block, w, d, m);
            for (uint c = 0u; c < COLS; ++c) {
                if (col0 + c >= p.n_cols) break;
                const uint xq_first = p.x_offset + (x_col0 + c) * p.x_stride + block * kQ8Words;
                const vec2 scales = unpackHalf2x16(xq[xq_first + 8u]);  // d_x, s_x
                const int sum = chain ? dot_levels(w, xq_first) : dot_word(w[lane], xq[xq_first + lane]);
                precise float dd = d * scales.x;
                acc[c] = cpu_fma(dd, float(sum), acc[c]);
#if defined(WEIGHT_HAS_MIN)
                offsets[c] = cpu_fma(m, scales.y, offsets[c]);
#endif
            }
        }
    }

    if (lane < kCpuLanes) {
        for (uint c = 0u; c < COLS; ++c) lane_sums[tile_row][c][lane] = acc[c];
    }
    if (lane == 0u) {
        for (uint c = 0u; c < COLS; ++c) min_sums[tile_row][c] = offsets[c];
    }
    barrier();
    if (lane < COLS && row < p.n_rows && col0 + lane < p.n_cols) {
        const uint c = lane;
        precise float r;
        if (chain) {
            r = lane_sums[tile_row][c][0];
        } else {
            precise float s04 = lane_sums[tile_row][c][0] + lane_sums[tile_row][c][4];
            precise float s26 = lane_sums[tile_row][c][2] + lane_sums[tile_row][c][6];
            precise float s15 = lane_sums[tile_row][c][1] + lane_sums[tile_row][c][5];
            precise float s37 = lane_sums[tile_row][c][3] + lane_sums[tile_row][c][7];
            r = (s04 + s26) + (s15 + s37);
#if defined(WEIGHT_HAS_MIN)
            r = r + min_sums[tile_row][c];
#endif
        }
        y[p.y_offset + (col0 + c) * p.y_stride + row] = r;
    }
}
