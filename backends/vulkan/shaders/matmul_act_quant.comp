#version 450
// The activations of one integer-dot matmul quantized once, before the matmul, into a scratch
// buffer that every workgroup of matmul_q8.comp / matmul_q8k.comp then reads (rather than each
// row tile quantizing the columns it needs again). One variant per activation type:
// ACT_Q8_0 / ACT_Q8_1 (one invocation per 32-element block) and ACT_Q8_K (one workgroup of 32
// per 256-element block). The bytes are the CPU backend's (act_quant.glsl): a block's levels and
// scales depend only on its own values, so quantizing here or per tile gives the same blocks.
//
// x [k, n_cols] F32 (k a multiple of the block size); the scratch holds per column
// k / block_size blocks, q_stride words apart:
// - Q8_0 / Q8_1: 9 words per 32 elements: 8 words of levels (element 4i in bits 0-7 of word i)
//   and the scale word (d's F16 bits, Q8_1's s in the high half): kQ8Words below.
// - Q8_K: 65 words per 256 elements: 64 words of levels, then d as float bits: kQ8KWords.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;

#include "common.glsl"
#include "cpu_math.glsl"
#include "act_quant.glsl"

layout(binding = 0, std430) readonly buffer Activations { float x[]; };
layout(binding = 1, std430) writeonly buffer Quantized { uint xq[]; };

layout(push_constant) uniform Params {
    uint k;         // elements per column
    uint n_cols;    // columns of this dispatch
    uint x_offset;  // element of column 0 in the x binding
    uint x_stride;  // elements between columns
    uint q_offset;  // word of column 0 in the scratch binding
    uint q_stride;  // words between quantized columns
} p;

#if defined(ACT_Q8_0) || defined(ACT_Q8_1)
const uint kQ8Words = 9;

void main() {
    const uint n_blocks = p.k / kQ8Block;
    const uint g = group_index() * 32u + gl_LocalInvocationID.x;
    if (g >= n_blocks * p.n_cols) return;
    const uint col = g / n_blocks, block = g % n_blocks;
    const uint first = p.x_offset + col * p.x_stride + block * kQ8Block;
    float v[kQ8Block];
    for (uint j = 0u; j < kQ8Block; ++j) v[j] = x[first + j];
    uint levels[8];
    uint scales;
    float id, d;
#if defined(ACT_Q8_1)
    quantize_q8_block(v, true, levels, scales, id, d);
#else
    quantize_q8_block(v, false, levels, scales, id, d);
#endif
    const uint out_first = p.q_offset + col * p.q_stride + block * kQ8Words;
    for (uint i = 0u; i < 8u; ++i) xq[out_first + i] = levels[i];
    xq[out_first + 8u] = scales;
}

#elif defined(ACT_Q8_K)
const uint kQ8KWords = 65;
const uint kChunk = kQ8KBlock / 32u;  // 8 elements per invocation

shared float chunk_max[32];
shared float block_iscale;

void main() {
    const uint n_blocks = p.k / kQ8KBlock;
    const uint g = group_index();
    if (g >= n_blocks * p.n_cols) return;  // the whole workgroup
    const uint col = g / n_blocks, block = g % n_blocks;
    const uint t = gl_LocalInvocationID.x;
    const uint first = p.x_offset + col * p.x_stride + block * kQ8KBlock + t * kChunk;
    // The block's first element of largest magnitude (ref: quant/ref_q6_q8_k.cpp): first per
    // chunk of 8, then over the chunks in order, both with a strict comparison.
    float v[kChunk];
    float best = 0.0;
    for (uint j = 0u; j < kChunk; ++j) {
        v[j] = x[first + j];
        if (abs(v[j]) > abs(best)) best = v[j];
    }
    chunk_max[t] = best;
    barrier();
    const uint out_first = p.q_offset + col * p.q_stride + block * kQ8KWords;
    if (t == 0u) {
        float block_best = 0.0;
        for (uint c = 0u; c < 32u; ++c) {
            if (abs(chunk_max[c]) > abs(block_best)) block_best = chunk_max[c];
        }
        float iscale, d;
        q8k_scales(block_best, iscale, d);
        block_iscale = iscale;
        xq[out_first + 64u] = floatBitsToUint(d);
    }
    barrier();
    for (uint w = 0u; w < 2u; ++w) {
        uint packed = 0u;
        for (uint b = 0u; b < 4u; ++b) packed |= (uint(q8k_level(block_iscale, v[4u * w + b])) & 0xFFu) << (8u * b);
        xq[out_first + 2u * t + w] = packed;
    }
}

#else
#error "define ACT_Q8_0, ACT_Q8_1 or ACT_Q8_K"
#endif
