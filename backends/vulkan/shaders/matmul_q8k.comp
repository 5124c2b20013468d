#version 450
// y = W x with integer dot products for the K-quants and IQ4_XS, whose activations the CPU
// backend (and llama.cpp) quantizes to Q8_K: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS. W [k, n_rows]
// (k a multiple of 256), x [k, n_cols] quantized, y [n_rows, n_cols] F32.
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
    uint chain_rows;  // rows [0, chain_rows) of this dispatch in the CPU's x8 order
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
    const uint row_addr = p.w_offset + row * p.w_stride;
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
                    const uint unit_first = p.x_offset + (col0 + c) * p.x_stride + sb * kQ8KWords + u * 8u;
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
                const float dx = uintBitsToFloat(xq[p.x_offset + (col0 + c) * p.x_stride + sb * kQ8KWords + 64u]);
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
        y[p.y_offset + (col0 + c) * p.y_stride + row] = r;
    }
}
