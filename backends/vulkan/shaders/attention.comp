#version 450
// Causal attention of one query row and one head per workgroup over the paged KV cache
// (Backend::attention). K_<T> / V_<T> pick the cache types (attention.variants): F32, F16, Q8_0.
//
// The arithmetic follows the CPU backend (backends/cpu/ops_attention.cpp), which follows
// llama.cpp's CPU flash attention: q is rounded to the K type's dot type first (F16 for an F16
// cache, Q8_0 blocks for a Q8_0 cache); softmax is online in position order (ref: Milakov &
// Gimelshein, arXiv:1805.02867); with an F16 V cache the running sum of V is rounded to F16
// after every update. Positions are visited in chunks of WG: thread j computes the score of
// position chunk + j, then every thread walks the chunk's scores in order, keeping the same
// running max and sum, and updates the output dimensions it owns (d = t, t + WG, ...).
//
// EXACT (devices with shaderFloat64; the `_exact` variants): the CPU backend's bits. exp() is
// glibc's expf (cpu_math.glsl's cpu_expf), an F16 K dot is summed in the CPU's order (ops_attention_kernels.h:
// 4 FMA accumulators of 16 lanes over steps of 64, folded, the rest in double), and the running
// sum is rescaled without contraction.
//
// Attention sinks (p.has_sinks; binding 5, one logit per head): after the last position, as the
// CPU and ggml's flash attention take them: the sink joins the running max (the accumulator
// rescaled in F32, without the F16 rounding) and adds exp(sink - max) to the sum, with no value.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "cpu_math.glsl"

const uint WG = 64;
const uint kMaxHeadDim = 256;
const uint kDimsPerThread = kMaxHeadDim / WG;
layout(local_size_x = 64) in;

layout(binding = 0, std430) readonly buffer Q { float q[]; };
layout(binding = 1, std430) readonly buffer K { uint k[]; };
layout(binding = 2, std430) readonly buffer V { uint v[]; };
layout(binding = 3, std430) writeonly buffer Out { float o[]; };
// Per query: {pos, offset of its block table from the arguments' first word, number of blocks}
// (backends/backend.h, kAttentionQueryWords); the arguments start at element args_offset.
layout(binding = 4, std430) readonly buffer Args { int args[]; };
layout(binding = 5, std430) readonly buffer Sinks { float sinks[]; };  // bound to q when has_sinks = 0

layout(push_constant) uniform Params {
    uint n_queries;
    uint n_head;
    uint n_head_kv;
    uint head_dim;
    uint head_dim_v;
    uint block_size;
    uint window;  // 0 = unlimited
    float scale;
    uint q_offset;  // elements
    uint q_stride;
    uint k_offset;  // bytes
    uint k_stride;
    uint v_offset;  // bytes
    uint v_stride;
    uint o_offset;  // elements
    uint o_stride;
    uint first_query;  // args index of this dispatch's query 0 (row-range splitting)
    uint args_offset;  // elements
    uint has_sinks;
    uint sinks_offset;  // elements
} p;

shared float q_f[kMaxHeadDim];   // q in the K dot type, as floats (F32/F16)
shared int q_i8[kMaxHeadDim];    // Q8_0 K: q's quants
shared float q_d[kMaxHeadDim / 32];  // Q8_0 K: q's block scales (float of the stored F16)
shared float scores[WG];

uint rd_u16(uint byte_offset, bool from_k) {
    uint w = from_k ? k[byte_offset >> 2] : v[byte_offset >> 2];
    return (byte_offset & 2u) != 0 ? (w >> 16) : (w & 0xffffu);
}

int rd_i8(uint byte_offset, bool from_k) {
    uint w = from_k ? k[byte_offset >> 2] : v[byte_offset >> 2];
    return int(((w >> ((byte_offset & 3u) * 8u)) & 0xffu) << 24) >> 24;
}

#if defined(K_Q8_0) || defined(V_Q8_0)
const uint kQ8Block = 34;  // bytes: F16 scale + 32 int8
#endif

float round_half_away(float x) {
    float t = trunc(x);
    if (abs(x - t) >= 0.5) t += sign(x);
    return t;
}

#if defined(EXACT)
float exp_of(float x) { return cpu_expf(x); }
#else
float exp_of(float x) { return exp(x); }
#endif

// q . k of the head starting at byte kb of the K binding.
#if defined(EXACT)
#define TAIL_SUM double
#else
#define TAIL_SUM float
#endif
#if defined(K_F16)
float dot_qk(uint kb) {
    const uint kStep = 64u, kLanes = 16u;
    uint np = p.head_dim / kStep * kStep;
    precise TAIL_SUM sum = TAIL_SUM(0.0);
    if (np > 0u) {
        precise float acc[4][16];
        for (uint j = 0u; j < 4u; ++j)
            for (uint l = 0u; l < kLanes; ++l) acc[j][l] = 0.0;
        for (uint i = 0u; i < np; i += kStep)
            for (uint j = 0u; j < 4u; ++j)
                for (uint l = 0u; l < kLanes; ++l) {
                    uint e = i + j * kLanes + l;
                    acc[j][l] = cpu_fma(unpackHalf2x16(rd_u16(kb + 2u * e, true)).x, q_f[e], acc[j][l]);
                }
        precise float h[8];
        for (uint l = 0u; l < kLanes; ++l) {
            acc[0][l] = acc[0][l] + acc[2][l];
            acc[1][l] = acc[1][l] + acc[3][l];
            acc[0][l] = acc[0][l] + acc[1][l];
        }
        for (uint l = 0u; l < 8u; ++l) h[l] = acc[0][l + 8u] + acc[0][l];
        precise float g0 = h[4] + h[0], g1 = h[5] + h[1], g2 = h[6] + h[2], g3 = h[7] + h[3];
        precise float folded = (g0 + g2) + (g1 + g3);
        sum = TAIL_SUM(folded);
    }
    for (uint i = np; i < p.head_dim; ++i) {
        precise float prod = unpackHalf2x16(rd_u16(kb + 2u * i, true)).x * q_f[i];
        sum += TAIL_SUM(prod);
    }
    return float(sum);
}
#else
float dot_qk(uint kb) {
    float s = 0.0;
#if defined(K_F32)
    for (uint i = 0; i < p.head_dim; ++i) s += q_f[i] * uintBitsToFloat(k[(kb >> 2) + i]);
#elif defined(K_Q8_0)
    for (uint b = 0; b < p.head_dim / 32u; ++b) {
        uint blk = kb + b * kQ8Block;
        int sumi = 0;
        for (uint j = 0; j < 32u; ++j) sumi += q_i8[b * 32u + j] * rd_i8(blk + 2u + j, true);
        s += float(sumi) * (unpackHalf2x16(rd_u16(blk, true)).x * q_d[b]);
    }
#else
#error "attention.comp: define K_F32, K_F16 or K_Q8_0"
#endif
    return s;
}
#endif

// Element d of the V head starting at byte vb.
float load_v(uint vb, uint d) {
#if defined(V_F32)
    return uintBitsToFloat(v[(vb >> 2) + d]);
#elif defined(V_F16)
    return unpackHalf2x16(rd_u16(vb + 2u * d, false)).x;
#elif defined(V_Q8_0)
    uint blk = vb + (d / 32u) * kQ8Block;
    return float(rd_i8(blk + 2u + d % 32u, false)) * unpackHalf2x16(rd_u16(blk, false)).x;
#else
#error "attention.comp: define V_F32, V_F16 or V_Q8_0"
#endif
}

float acc_round(float x) {
#if defined(V_F16)
    return round_to_f16(x);
#else
    return x;
#endif
}

void main() {
    uint g = group_index();
    if (g >= p.n_queries * p.n_head) return;
    uint qi = g / p.n_head;
    uint h = g - qi * p.n_head;
    uint hk = h / (p.n_head / p.n_head_kv);
    uint t = gl_LocalInvocationID.x;

    uint a = p.args_offset + 3u * (p.first_query + qi);
    int pos = args[a];
    uint table = p.args_offset + uint(args[a + 1u]);

    // q in the K dot type.
    uint qb = p.q_offset + qi * p.q_stride + h * p.head_dim;
    for (uint i = t; i < p.head_dim; i += WG) {
#if defined(K_F16)
        q_f[i] = round_to_f16(q[qb + i]);
#else
        q_f[i] = q[qb + i];
#endif
    }
    barrier();
#if defined(K_Q8_0)
    if (t < p.head_dim / 32u) {  // quant/ref_legacy.cpp from_float_q8_0
        float amax = 0.0;
        for (uint j = 0; j < 32u; ++j) amax = max(amax, abs(q_f[t * 32u + j]));
        float d = amax / 127.0;
        float id = d != 0.0 ? 1.0 / d : 0.0;
        q_d[t] = round_to_f16(d);
        for (uint j = 0; j < 32u; ++j) q_i8[t * 32u + j] = int(round_half_away(q_f[t * 32u + j] * id));
    }
    barrier();
#endif

#if defined(K_F32)
    uint k_head_bytes = p.head_dim * 4u;
#elif defined(K_F16)
    uint k_head_bytes = p.head_dim * 2u;
#else
    uint k_head_bytes = p.head_dim / 32u * kQ8Block;
#endif
#if defined(V_F32)
    uint v_head_bytes = p.head_dim_v * 4u;
#elif defined(V_F16)
    uint v_head_bytes = p.head_dim_v * 2u;
#else
    uint v_head_bytes = p.head_dim_v / 32u * kQ8Block;
#endif

    int first = p.window > 0u ? max(0, pos - int(p.window) + 1) : 0;
    float acc[kDimsPerThread];
    for (uint j = 0; j < kDimsPerThread; ++j) acc[j] = 0.0;
    float max_score = -1.0 / 0.0;
    precise float sum = 0.0;
    for (int chunk = first; chunk <= pos; chunk += int(WG)) {
        int my_pos = chunk + int(t);
        if (my_pos <= pos) {
            uint row = uint(args[table + uint(my_pos) / p.block_size]) * p.block_size + uint(my_pos) % p.block_size;
            scores[t] = dot_qk(p.k_offset + row * p.k_stride + hk * k_head_bytes) * p.scale;
        }
        barrier();
        int n = min(int(WG), pos - chunk + 1);
        for (int j = 0; j < n; ++j) {
            float s = scores[j];
            float ms = 1.0, vs = 1.0;
            bool new_max = s > max_score;
            if (new_max) {
                ms = exp_of(max_score - s);
                max_score = s;
            } else {
                vs = exp_of(s - max_score);
            }
            int cpos = chunk + j;
            uint row = uint(args[table + uint(cpos) / p.block_size]) * p.block_size + uint(cpos) % p.block_size;
            uint vb = p.v_offset + row * p.v_stride + hk * v_head_bytes;
            for (uint jj = 0; jj < kDimsPerThread; ++jj) {
                uint d = t + jj * WG;
                if (d >= p.head_dim_v) break;
                if (new_max) {
                    precise float rescaled = acc[jj] * ms;
                    acc[jj] = acc_round(rescaled);
                }
                // As the CPU: one FMA per element, the tail included.
                acc[jj] = acc_round(cpu_fma(load_v(vb, d), vs, acc[jj]));
            }
            precise float rescaled_sum = sum * ms;
            sum = rescaled_sum + vs;
        }
        barrier();
    }
    if (p.has_sinks != 0u) {
        const float s = sinks[p.sinks_offset + h];
        float ms = 1.0, vs = 1.0;
        if (s > max_score) {
            ms = exp_of(max_score - s);
            for (uint jj = 0; jj < kDimsPerThread; ++jj) {
                precise float rescaled = acc[jj] * ms;
                acc[jj] = rescaled;
            }
        } else {
            vs = exp_of(s - max_score);
        }
        precise float rescaled_sum = sum * ms;
        sum = rescaled_sum + vs;
    }
    float inv = 1.0 / sum;
    uint ob = p.o_offset + qi * p.o_stride + h * p.head_dim_v;
    for (uint jj = 0; jj < kDimsPerThread; ++jj) {
        uint d = t + jj * WG;
        precise float scaled = acc[jj] * inv;
        if (d < p.head_dim_v) o[ob + d] = scaled;
    }
}
