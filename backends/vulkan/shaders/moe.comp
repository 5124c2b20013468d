#version 450
// The mixture-of-experts ops but the expert matmul (which is matmul*.comp's MATMUL_ID twins), one
// per variant (moe.variants): OP_ROUTE (Backend::moe_route, one invocation per token), OP_ADD_ID,
// OP_COMBINE and OP_SWIGLU_OAI (one invocation per output element). They repeat the CPU backend's
// float operations (backends/cpu/ops_moe.cpp, which follows ggml's ops): the router's softmax
// subtracts the max, exponentiates, sums (in double with EXACT, as the CPU does) and multiplies by
// the rounded reciprocal; top-k ranks by value with ties to the lower expert; moe_combine rounds
// each product before adding it (`precise`: no contraction). EXACT (devices with shaderFloat64):
// exp is cpu_math.glsl's cpu_expf, glibc's expf bit for bit.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "cpu_math.glsl"

layout(local_size_x_id = 0) in;

#if defined(EXACT)
float exp_of(float x) { return cpu_expf(x); }
#define SUM_T double
#else
float exp_of(float x) { return exp(x); }
#define SUM_T float
#endif

#if defined(OP_ROUTE)
layout(binding = 0, std430) readonly buffer Logits { float logits[]; };
layout(binding = 1, std430) writeonly buffer Ids { int ids[]; };
layout(binding = 2, std430) buffer Weights { float weights[]; };  // written, then read back (softmax)

layout(push_constant) uniform Params {
    uint n_expert;
    uint n_used;
    uint n;
    uint softmax_first;  // 1: softmax then top-k (MoeGating::SoftmaxThenTopK), 0: top-k then softmax
    uint normalize;
    uint l_offset, l_stride;  // elements
    uint i_offset, i_stride;  // words
    uint w_offset, w_stride;  // elements
} p;

// The score experts are ranked by: the softmax probability (exp(l - max) * inv, the CPU's
// float operations) or the raw logit.
float score(uint base, uint e, float max_logit, float inv) {
    const float l = logits[base + e];
    if (p.softmax_first == 0u) return l;
    precise float prob = exp_of(l - max_logit) * inv;
    return prob;
}

void main() {
    const uint t = group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (t >= p.n) return;
    const uint base = p.l_offset + t * p.l_stride;
    float max_logit = -1.0 / 0.0;
    for (uint e = 0u; e < p.n_expert; ++e) max_logit = max(max_logit, logits[base + e]);
    float inv = 1.0;
    if (p.softmax_first != 0u) {
        precise SUM_T sum = SUM_T(0.0);
        for (uint e = 0u; e < p.n_expert; ++e) sum += SUM_T(exp_of(logits[base + e] - max_logit));
        inv = float(SUM_T(1.0) / sum);
    }
    // Top-k by repeated selection: the best (score, expert) ranked after the previous choice.
    const uint wb = p.w_offset + t * p.w_stride;
    float prev_score = 1.0 / 0.0;
    int prev = -1;
    for (uint s = 0u; s < p.n_used; ++s) {
        float best_score = 0.0;
        int best = -1;
        for (uint e = 0u; e < p.n_expert; ++e) {
            const float v = score(base, e, max_logit, inv);
            const bool after_prev = v < prev_score || (v == prev_score && int(e) > prev);
            if (after_prev && (best < 0 || v > best_score)) {
                best_score = v;
                best = int(e);
            }
        }
        ids[p.i_offset + t * p.i_stride + s] = best;
        weights[wb + s] = best_score;
        prev_score = best_score;
        prev = best;
    }
    if (p.softmax_first == 0u) {
        // The softmax of the chosen logits (largest first, so the max is the first).
        const float mx = weights[wb];
        precise SUM_T sum = SUM_T(0.0);
        for (uint s = 0u; s < p.n_used; ++s) {
            const float v = exp_of(weights[wb + s] - mx);
            weights[wb + s] = v;
            sum += SUM_T(v);
        }
        const float r = float(SUM_T(1.0) / sum);
        for (uint s = 0u; s < p.n_used; ++s) {
            precise float v = weights[wb + s] * r;
            weights[wb + s] = v;
        }
    } else if (p.normalize != 0u) {
        precise SUM_T sum = SUM_T(0.0);
        for (uint s = 0u; s < p.n_used; ++s) sum += SUM_T(weights[wb + s]);
        const float clamped = max(float(sum), 6.103515625e-5);  // 2^-14, as llama.cpp clamps
        for (uint s = 0u; s < p.n_used; ++s) weights[wb + s] = weights[wb + s] / clamped;
    }
}

#elif defined(OP_ADD_ID)
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
layout(binding = 2, std430) readonly buffer Ids { int ids[]; };
layout(binding = 3, std430) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Params {
    uint ne0;
    uint n_rows;  // n_used * n
    uint a_offset, a_stride;
    uint b_offset, b_stride;
    uint b_rows;    // n_expert
    uint i_offset;  // word of row 0's expert id (the ids in slot order)
    uint y_offset, y_stride;
} p;

void main() {
    const uint i = group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.ne0 * p.n_rows) return;
    const uint row = i / p.ne0, col = i - row * p.ne0;
    const uint expert = uint(ids[p.i_offset + row]);
    // An id outside the table (device-side ids are not checked) gives NaN, not a stray read.
    const float bias = expert < p.b_rows ? b[p.b_offset + expert * p.b_stride + col] : uintBitsToFloat(0x7fc00000u);
    y[p.y_offset + row * p.y_stride + col] = a[p.a_offset + row * p.a_stride + col] + bias;
}

#elif defined(OP_COMBINE)
layout(binding = 0, std430) readonly buffer Y { float y[]; };
layout(binding = 1, std430) readonly buffer W { float w[]; };
layout(binding = 2, std430) writeonly buffer Out { float o[]; };

layout(push_constant) uniform Params {
    uint ne0;
    uint n;
    uint n_used;
    uint y_offset, y_stride;
    uint w_offset, w_stride;
    uint o_offset, o_stride;
} p;

void main() {
    const uint i = group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.ne0 * p.n) return;
    const uint t = i / p.ne0, col = i - t * p.ne0;
    precise float acc = y[p.y_offset + (t * p.n_used) * p.y_stride + col] * w[p.w_offset + t * p.w_stride];
    for (uint s = 1u; s < p.n_used; ++s) {
        const float ys = y[p.y_offset + (t * p.n_used + s) * p.y_stride + col];
        precise float product = ys * w[p.w_offset + t * p.w_stride + s];
        acc = acc + product;
    }
    o[p.o_offset + t * p.o_stride + col] = acc;
}

#elif defined(OP_SWIGLU_OAI)
layout(binding = 0, std430) readonly buffer Gate { float gate[]; };
layout(binding = 1, std430) readonly buffer Up { float up[]; };
layout(binding = 2, std430) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Params {
    uint ne0;
    uint ne1;
    uint g_offset, g_stride;
    uint u_offset, u_stride;
    uint y_offset, y_stride;
    float alpha;
    float limit;
} p;

void main() {
    const uint i = group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.ne0 * p.ne1) return;
    const uint row = i / p.ne0, col = i - row * p.ne0;
    const float g = min(gate[p.g_offset + row * p.g_stride + col], p.limit);
    const float u = clamp(up[p.u_offset + row * p.u_stride + col], -p.limit, p.limit);
    precise float denominator = 1.0 + exp_of(p.alpha * (-g));
    precise float glu = g / denominator;
    precise float r = glu * (u + 1.0);
    y[p.y_offset + row * p.y_stride + col] = r;
}

#else
#error "moe.comp: define one OP_*"
#endif
