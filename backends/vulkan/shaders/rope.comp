#version 450
// Rotary position embedding, in place on x [n_head * head_dim, n_tokens] (F32). One thread per
// (token, dimension pair i): it computes the pair's angle once and rotates that pair in every
// head. The angle is built exactly as the CPU backend (and llama.cpp) builds it: theta =
// pos * theta_scale^i by i repeated float multiplications, then linear / llama3 / YaRN scaling or
// the model's per-frequency divisors. ref: RoFormer (arXiv:2104.09864); YaRN (arXiv:2309.00071)
// section 3.2 and eq. 22; Llama 3.1 apply_scaling() (Meta llama-models).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(binding = 0, std430) buffer X { float x[]; };
layout(binding = 1, std430) readonly buffer Positions { int positions[]; };
layout(binding = 2, std430) readonly buffer FreqFactors { float freq_factors[]; };

const uint kNone = 0, kLinear = 1, kYarn = 2, kLlama3 = 3;

layout(push_constant) uniform Params {
    uint n_tokens;
    uint x_offset;  // elements
    uint x_stride;  // elements
    uint n_head;
    uint head_dim;
    uint n_rot;
    uint neox;
    uint scaling;   // kNone .. kLlama3
    uint has_freq_factors;
    float theta_scale;  // freq_base^(-2 / n_rot), computed on the host as the CPU does
    float scaling_factor;
    float orig_ctx;
    float llama3_low;   // llama3_low_freq_factor
    float llama3_high;  // llama3_high_freq_factor
    float yarn_low;     // yarn correction dims (host-computed, as the CPU does)
    float yarn_high;
    float yarn_mscale;
} p;

const float kTwoPi = 6.2831853071795864769;

// cos/sin of a (possibly large) angle: reduced by 2 pi in three exact-ish parts first, because GPU
// sin/cos lose accuracy far from zero and positions reach 1e5 radians.
void cos_sin(float a, out float c, out float s) {
    precise float k = roundEven(a * (1.0 / kTwoPi));
    precise float r = a - k * 6.28125;
    r = r - k * 0.0019350051879882812;
    r = r - k * 3.0199160506e-07;
    c = cos(r);
    s = sin(r);
}

float llama3_divisor(float freq) {
    float wavelen = kTwoPi / freq;
    float low_wavelen = p.orig_ctx / p.llama3_low;
    float high_wavelen = p.orig_ctx / p.llama3_high;
    if (wavelen < high_wavelen) return 1.0;
    if (wavelen > low_wavelen) return p.scaling_factor;
    float smooth_ = (p.orig_ctx / wavelen - p.llama3_low) / (p.llama3_high - p.llama3_low);
    return 1.0 / ((1.0 - smooth_) / p.scaling_factor + smooth_);
}

void main() {
    uint half_rot = p.n_rot / 2;
    uint id = group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (id >= p.n_tokens * half_rot) return;
    uint t = id / half_rot;
    uint i = id - t * half_rot;

    precise float theta = float(positions[t]);
    precise float freq = 1.0;
    for (uint j = 0; j < i; ++j) {
        theta *= p.theta_scale;
        freq *= p.theta_scale;
    }
    float angle = theta;
    float mscale = 1.0;
    if (p.has_freq_factors != 0) {
        angle = theta / freq_factors[i];
    } else if (p.scaling == kLlama3) {
        angle = theta / llama3_divisor(freq);
    } else if (p.scaling == kLinear) {
        angle = theta / p.scaling_factor;
    }
    if (p.scaling == kYarn) {
        float interp = theta / p.scaling_factor;
        float ramp = 1.0 - clamp((float(i) - p.yarn_low) / max(0.001, p.yarn_high - p.yarn_low), 0.0, 1.0);
        angle = interp * (1.0 - ramp) + theta * ramp;
        mscale = p.yarn_mscale;
    }
    float c, s;
    cos_sin(angle, c, s);
    c *= mscale;
    s *= mscale;

    uint i0 = p.neox != 0 ? i : 2 * i;
    uint i1 = p.neox != 0 ? i + half_rot : 2 * i + 1;
    uint base = p.x_offset + t * p.x_stride;
    for (uint h = 0; h < p.n_head; ++h) {
        uint o = base + h * p.head_dim;
        float a = x[o + i0], b = x[o + i1];
        x[o + i0] = a * c - b * s;
        x[o + i1] = a * s + b * c;
    }
}
