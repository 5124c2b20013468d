// RoPE's rotation per (position, dimension pair): cos and sin of the pair's angle, times YaRN's
// magnitude. One definition for every backend: the CPU backend evaluates it per row, the Vulkan
// backend evaluates it on the host and uploads the table, so both rotate by the same bits (a
// device's cos/sin are not libm's, and a one-ulp difference is enough to move a Q8 activation
// level downstream; docs/VULKAN.md, "Bit-exact ops").
//
// Header-only on purpose: the Vulkan backend is a library of its own and must not link the CPU
// backend's; both include this and get the same arithmetic (plain SSE2 float operations and
// libm's cosf/sinf; none of the files that include it is built with FMA contraction).
// ref: RoFormer (arXiv:2104.09864); YaRN (arXiv:2309.00071) section 3.2 and eq. 22; Llama 3.1
// apply_scaling() (Meta llama-models).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "backends/backend.h"

namespace deskside::backends {

// YaRN: the frequency index range [low, high] over which interpolation ramps into
// extrapolation ("NTK-by-parts").
inline void rope_yarn_corr_dims(const RopeParams& p, float& low, float& high) {
    const auto dim_for = [&](float n_rotations) {
        return p.n_rot * std::log(p.orig_ctx / (n_rotations * 2 * std::numbers::pi_v<float>)) /
               (2 * std::log(p.freq_base));
    };
    low = std::max(0.0f, std::floor(dim_for(p.yarn_beta_fast)));
    high = std::min(static_cast<float>(p.n_rot - 1), std::ceil(dim_for(p.yarn_beta_slow)));
}

// Llama 3.1 scaling: the divisor of frequency `freq` (low frequencies divided by the factor, high
// ones kept, a smooth blend in between).
inline float rope_llama3_divisor(const RopeParams& p, float freq) {
    const float wavelen = 2 * std::numbers::pi_v<float> / freq;
    const float low_wavelen = p.orig_ctx / p.llama3_low_freq_factor;
    const float high_wavelen = p.orig_ctx / p.llama3_high_freq_factor;
    if (wavelen < high_wavelen) return 1.0f;
    if (wavelen > low_wavelen) return p.scaling_factor;
    const float smooth = (p.orig_ctx / wavelen - p.llama3_low_freq_factor) /
                         (p.llama3_high_freq_factor - p.llama3_low_freq_factor);
    return 1.0f / ((1 - smooth) / p.scaling_factor + smooth);
}

// cos_out[i], sin_out[i] for the n_rot / 2 pairs of position `pos`. theta_i = pos *
// base^(-2i / n_rot), advanced by repeated multiplication in float as llama.cpp does, so angles
// agree with it to the last bit at long positions.
inline void rope_angles(const RopeParams& p, int32_t pos, float* cos_out, float* sin_out) {
    const int64_t n_pairs = p.n_rot / 2;
    const float theta_scale = std::pow(p.freq_base, -2.0f / p.n_rot);
    float low = 0, high = 0;
    if (p.scaling == RopeScalingType::Yarn) rope_yarn_corr_dims(p, low, high);
    float theta = static_cast<float>(pos);
    float freq = 1.0f;
    for (int64_t i = 0; i < n_pairs; ++i, theta *= theta_scale, freq *= theta_scale) {
        float angle = theta;
        float mscale = 1.0f;  // ggml: attn_factor, times YaRN's magnitude below
        if (!p.freq_factors.empty()) {
            angle = theta / p.freq_factors[i];
        } else if (p.scaling == RopeScalingType::Llama3) {
            angle = theta / rope_llama3_divisor(p, freq);
        } else if (p.scaling == RopeScalingType::Linear) {
            angle = theta / p.scaling_factor;
        }
        if (p.scaling == RopeScalingType::Yarn) {
            const float interp = theta / p.scaling_factor;
            const float ramp = 1.0f - std::clamp((i - low) / std::max(0.001f, high - low), 0.0f, 1.0f);
            angle = interp * (1 - ramp) + theta * ramp;
            mscale = 1.0f + 0.1f * std::log(p.scaling_factor);  // ref: YaRN eq. 22 (sqrt(1/t))
        }
        mscale *= p.attn_factor;
        cos_out[i] = std::cos(angle) * mscale;
        sin_out[i] = std::sin(angle) * mscale;
    }
}

// The rotations of every position below p.n_ctx, (cos, sin) interleaved per pair: element
// 2 (pos * n_rot / 2 + i) is pair i's cos at `pos`, the next its sin. Device backends upload it
// once per set of rope parameters (RopeTableKey) and index it by the step's positions.
inline std::vector<float> rope_rotation_table(const RopeParams& p) {
    const int64_t half = p.n_rot / 2;
    std::vector<float> rotations(static_cast<size_t>(p.n_ctx * half * 2));
    std::vector<float> cos_row(static_cast<size_t>(half)), sin_row(static_cast<size_t>(half));
    for (int64_t pos = 0; pos < p.n_ctx; ++pos) {
        rope_angles(p, static_cast<int32_t>(pos), cos_row.data(), sin_row.data());
        for (int64_t i = 0; i < half; ++i) {
            rotations[2 * (pos * half + i)] = cos_row[i];
            rotations[2 * (pos * half + i) + 1] = sin_row[i];
        }
    }
    return rotations;
}

// Everything rope_rotation_table's values depend on (n_head does not matter).
struct RopeTableKey {
    int64_t n_rot;
    float freq_base;
    int scaling;
    float scaling_factor;
    int64_t orig_ctx;
    float llama3_low, llama3_high, yarn_fast, yarn_slow;
    int64_t n_ctx;
    float attn_factor;
    std::vector<float> freq_factors;
    bool operator==(const RopeTableKey&) const = default;
};

inline RopeTableKey rope_table_key(const RopeParams& p) {
    return {p.n_rot,      p.freq_base,          static_cast<int>(p.scaling), p.scaling_factor,
            p.orig_ctx,   p.llama3_low_freq_factor, p.llama3_high_freq_factor, p.yarn_beta_fast,
            p.yarn_beta_slow, p.n_ctx, p.attn_factor, std::vector<float>(p.freq_factors.begin(), p.freq_factors.end())};
}

}  // namespace deskside::backends
