#version 450
// y = W x with integer dot products for the K-quants and IQ4_XS, whose activations the CPU
// backend (and llama.cpp) quantizes to Q8_K: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS. W [k, n_rows]
// (k a multiple of 256), x [k, n_cols] quantized, y [n_rows, n_cols] F32.
// Also the low-bit i-quants IQ2_XXS ... IQ1_M (Q8_K activations too; decoded by iq_lowbit.glsl,
// their sum scaled by the type's power of two kIqDotScale at the end, as on the CPU).
//
// matmul_q8.comp's layout (ROWS rows x 8 lanes, COLS columns per tile), with 256-element
// activation blocks quantized once per matmul by matmul_act_quant.comp (its first element of
// largest magnitude, the scales with act_quant.glsl's exact divisions, then the levels, as on the
// CPU) into a scratch buffer of 65 words per block (64 words of levels, then d as float bits).
//
// Summation order: the CPU backend's at its AVX2 level (its bits; docs/VULKAN.md, "Bit-exact
// ops"). Rows below p.chain_rows are the ones the CPU keeps row-interleaved (Q4_Kx8,
// backends/cpu/repack.h): per super-block the exact integer sum of scale x level x activation
// and of min x group sum, then acc_d = fma(d * d_x, float(isum), acc_d), acc_m = fma(dmin * d_x,
// float(msum), acc_m), output acc_d - acc_m, by lane 0. The other rows follow the CPU's vec_dot
// (backends/cpu/dot_kquant_avx2.cpp): lane j < 8 holds int32 lane j, the elements 4j .. 4j + 3 of
// each 32-element unit times the unit half's scale, with the levels stored unsigned for Q3_K
// (value + 4) and lane 0 carrying its whole offset correction; acc_j = fma(d * d_x,
// float(isum_j), acc_j) per super-block, the CPU's horizontal sum, then minus the min chain
// mins = fma(dmin * d_x, float(msum), mins) for Q2_K/Q4_K/Q5_K.
// Integer sums: OpSDotAccSatKHR with USE_INT_DOT (see matmul_q8.comp), plain multiply-adds
// otherwise, the same integers either way.
//
// MATMUL_ID (the matmul_id_* twins, for Backend::matmul_id): W stacks experts; a workgroup is
// one output column (COLS = 1) and reads W's rows at that column's expert (binding 3, the ids),
// with the same arithmetic per output as above, so a row gets matmul's bits for its expert.
#extension GL_GOOGLE_include_directive : require
#if defined(USE_INT_DOT)
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4453)
int sdot_acc_sat(int a, int b, int acc, spirv_literal int packed_format);
#endif

layout(constant_id = 0) const uint ROWS = 4;  // output rows per workgroup
layout(constant_id = 1) const uint COLS = 1;  // activation columns per workgroup
layout(local_size_x = 8, local_size_y_id = 0, local_size_z = 1) in;  // the CPU's 8 float lanes

#include "common.glsl"
#include "cpu_math.glsl"
// The low-bit i-quants' codebook (iq_lowbit.glsl), after the buffers below.
#if defined(MATMUL_ID)
#define IQ_CODEBOOK_BINDING 4
#else
#define IQ_CODEBOOK_BINDING 3
#endif
#include "dequant.glsl"
#include "weight_levels.glsl"

layout(binding = 1, std430) readonly buffer QuantizedActivations { uint xq[]; };
layout(binding = 2, std430) writeonly buffer Outputs { float y[]; };
#if defined(MATMUL_ID)
layout(binding = 3, std430) readonly buffer ExpertIds { uint expert_ids[]; };
#endif

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

const uint kCpuLanes = 8;  // float lanes of the CPU's AVX2 accumulator
const uint kQ8KWords = 65;  // words per quantized 256-element block (matmul_act_quant.comp)
const uint kUnitsPerSuperBlock = 8;

// The CPU's Q3_K lanes hold the stored levels (value + 4) and lane 0 the offset correction; its
// Q6_K lanes (since session 5, repack2) hold the signed values, like every other type.
#if defined(TYPE_Q3_K)
const int kLevelOffset = 4;
#else
const int kLevelOffset = 0;
#endif
#if defined(TYPE_Q2_K) || defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#define HAS_MINS 1
#endif

shared float lane_sums[ROWS][COLS][kCpuLanes];
shared float min_sums[ROWS][COLS];

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

// The CPU's int32 lane j for one unit: scale of j's half times (stored unsigned levels . x) over
// elements 4j .. 4j + 3.
int unit_lane_sum(uint w[8], int scale[2], uint xl[8], uint j) {
    return scale[j / 4u] * (dot_word(w[j], xl[j]) + kLevelOffset * dot_word(0x01010101u, xl[j]));
}

// Sum over the unit's two halves of v[h] times the half's activation sum.
int unit_half_sums(int v[2], uint xl[8]) {
    int lo = 0, hi = 0;
    for (uint i = 0u; i < 4u; ++i) {
        lo += dot_word(0x01010101u, xl[i]);
        hi += dot_word(0x01010101u, xl[i + 4u]);
    }
    return v[0] * lo + v[1] * hi;
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
    const uint n_units = p.k / kUnit;

    // x8 rows: one chain (lane 0); other rows: the CPU's 8 lane chains (lanes 0..7).
    const bool chain = row < p.chain_rows;
    const uint active_lanes = chain ? 1u : kCpuLanes;
    const uint n_super = n_units / kUnitsPerSuperBlock;
    precise float acc[COLS];
    precise float mins[COLS];
    for (uint c = 0u; c < COLS; ++c) {
        acc[c] = 0.0;
        mins[c] = 0.0;
    }

    if (row < p.n_rows && lane < active_lanes) {
        for (uint sb = 0u; sb < n_super; ++sb) {
            int isum[COLS], msum[COLS];
            for (uint c = 0u; c < COLS; ++c) {
                isum[c] = 0;
                msum[c] = 0;
            }
            float d = 0.0, dmin = 0.0;
            for (uint u = 0u; u < kUnitsPerSuperBlock; ++u) {
                uint w[8];
                int scale[2], minv[2];
                weight_levels_k(row_addr, sb * kUnitsPerSuperBlock + u, w, scale, minv, d, dmin);
                for (uint c = 0u; c < COLS; ++c) {
                    if (col0 + c >= p.n_cols) break;
                    const uint unit_first = p.x_offset + (x_col0 + c) * p.x_stride + sb * kQ8KWords + u * 8u;
                    uint xl[8];
                    for (uint i = 0u; i < 8u; ++i) xl[i] = xq[unit_first + i];
                    if (chain) {
                        for (uint j = 0u; j < kCpuLanes; ++j) isum[c] += unit_lane_sum(w, scale, xl, j);
                    } else {
                        isum[c] += unit_lane_sum(w, scale, xl, lane);
                    }
                    // Lane 0 carries the level offset's correction and the mins (integers).
                    if (lane == 0u) {
                        isum[c] -= kLevelOffset * unit_half_sums(scale, xl);
                        msum[c] += unit_half_sums(minv, xl);
                    }
                }
            }
            for (uint c = 0u; c < COLS; ++c) {
                if (col0 + c >= p.n_cols) break;
                const float dx = uintBitsToFloat(xq[p.x_offset + (x_col0 + c) * p.x_stride + sb * kQ8KWords + 64u]);
                precise float dd = d * dx;
                acc[c] = cpu_fma(dd, float(isum[c]), acc[c]);
#if defined(HAS_MINS)
                precise float dm = dmin * dx;
                mins[c] = cpu_fma(dm, float(msum[c]), mins[c]);
#endif
            }
        }
    }

    if (lane < kCpuLanes) {
        for (uint c = 0u; c < COLS; ++c) lane_sums[tile_row][c][lane] = acc[c];
    }
    if (lane == 0u) {
        for (uint c = 0u; c < COLS; ++c) min_sums[tile_row][c] = mins[c];
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
        }
#if defined(HAS_MINS)
        r = r - min_sums[tile_row][c];
#endif
#if defined(TYPE_IQ_LOWBIT)
        r = r * kIqDotScale;  // the type's power of two, after the sum as on the CPU
#endif
        y[p.y_offset + (col0 + c) * p.y_stride + row] = r;
    }
}
