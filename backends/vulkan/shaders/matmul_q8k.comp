#version 450
// y = W x with integer dot products for the K-quants and IQ4_XS, whose activations the CPU
// backend (and llama.cpp) quantizes to Q8_K: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS. W [k, n_rows]
// (k a multiple of 256), x [k, n_cols] F32, y [n_rows, n_cols] F32.
//
// matmul_q8.comp's layout and invariance argument, with 256-element activation blocks: each
// 1024-element step quantizes 4 Q8_K blocks per column into shared memory in three phases
// (each block's first element of largest magnitude from 32 chunks of 8, its scales with
// act_quant.glsl's exact divisions, then its levels), so a block's levels and d depend only on
// its 256 values, as on the CPU. Lane l then multiplies unit (32 elements) step / 32 + l of its
// row: per 16-element half an exact integer dot, and in float
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
#include "act_quant.glsl"

layout(binding = 1, std430) readonly buffer Activations { float x[]; };
layout(binding = 2, std430) writeonly buffer Outputs { float y[]; };

// As matmul.comp's (vk_matmul.cpp fills all three kernels' with one struct).
layout(push_constant) uniform Params {
    uint k;
    uint n_rows;
    uint n_cols;
    uint w_offset;  // bytes
    uint w_stride;  // bytes
    uint x_offset;  // elements
    uint x_stride;
    uint y_offset;
    uint y_stride;
} p;

const uint kLanes = 32;
const uint kStep = kLanes * kUnit;                // 1024 elements of k per step
const uint kBlocksPerStep = kStep / kQ8KBlock;    // 4 Q8_K blocks per column
const uint kChunk = 8;                            // elements per thread in the max search
const uint kChunks = kQ8KBlock / kChunk;          // 32

shared float xf[COLS * kBlocksPerStep][kQ8KBlock];  // the step's activations
shared float chunk_max[COLS * kBlocksPerStep][kChunks];
shared float block_iscale[COLS * kBlocksPerStep];
shared float block_d[COLS * kBlocksPerStep];
shared uint xq[COLS][kLanes][9];  // levels of each unit, 8 words (+1 against bank conflicts)
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
    const uint thread = tile_row * kLanes + lane;
    const uint n_threads = ROWS * kLanes;
    const uint row = (tile % row_tiles) * ROWS + tile_row;
    const uint col0 = (tile / row_tiles) * COLS;
    const uint row_addr = p.w_offset + row * p.w_stride;
    const uint n_units = p.k / kUnit;

    precise float acc[COLS];
    for (uint c = 0u; c < COLS; ++c) acc[c] = 0.0;

    for (uint step = 0u; step < p.k; step += kStep) {
        // 1. Load the activations; each chunk of 8 keeps its first element of largest magnitude.
        for (uint i = thread; i < COLS * kBlocksPerStep * kChunks; i += n_threads) {
            const uint blk = i / kChunks;  // column blk / 4, block blk % 4 of the step
            const uint chunk = i % kChunks;
            const uint c = blk / kBlocksPerStep;
            const uint e = step + (blk % kBlocksPerStep) * kQ8KBlock + chunk * kChunk;
            const bool inside = col0 + c < p.n_cols && e < p.k;
            const uint first = p.x_offset + (col0 + c) * p.x_stride + e;
            float best = 0.0;
            for (uint j = 0u; j < kChunk; ++j) {
                const float v = inside ? x[first + j] : 0.0;
                xf[blk][chunk * kChunk + j] = v;
                if (abs(v) > abs(best)) best = v;
            }
            chunk_max[blk][chunk] = best;
        }
        barrier();
        // 2. Each block's scales from its first element of largest magnitude (chunks in order).
        for (uint blk = thread; blk < COLS * kBlocksPerStep; blk += n_threads) {
            float best = 0.0;
            for (uint chunk = 0u; chunk < kChunks; ++chunk) {
                if (abs(chunk_max[blk][chunk]) > abs(best)) best = chunk_max[blk][chunk];
            }
            float iscale, d;
            q8k_scales(best, iscale, d);
            block_iscale[blk] = iscale;
            block_d[blk] = d;
        }
        barrier();
        // 3. The levels, one word (4 elements) per thread and pass.
        for (uint i = thread; i < COLS * kLanes * 8u; i += n_threads) {
            const uint c = i / (kLanes * 8u);
            const uint unit = (i / 8u) % kLanes;
            const uint word = i % 8u;
            const uint blk = c * kBlocksPerStep + unit / 8u;
            const uint first = (unit % 8u) * kUnit + 4u * word;
            uint packed = 0u;
            for (uint b = 0u; b < 4u; ++b) packed |= (uint(q8k_level(block_iscale[blk], xf[blk][first + b])) & 0xFFu) << (8u * b);
            xq[c][unit][word] = packed;
        }
        barrier();
        // 4. Lane l: unit step / 32 + l of its row against every column.
        const uint unit = step / kUnit + lane;
        if (row < p.n_rows && unit < n_units) {
            uint w[8];
            int scale[2], minv[2];
            float d, dmin;
            weight_levels_k(row_addr, unit, w, scale, minv, d, dmin);
            const uint ones[8] = uint[8](0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u,
                                         0x01010101u, 0x01010101u);
            for (uint c = 0u; c < COLS; ++c) {
                uint xl[8];
                for (uint i = 0u; i < 8u; ++i) xl[i] = xq[c][lane][i];
                const float dx = block_d[c * kBlocksPerStep + lane / 8u];
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
