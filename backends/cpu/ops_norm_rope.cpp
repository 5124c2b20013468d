// CPU rms_norm and rope.
#include <cassert>
#include <cmath>
#include <numbers>
#include <vector>

#include "backends/cpu/cpu_backend.h"

namespace deskside::backends::cpu {

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
    assert(x.ne0 == y.ne0 && x.ne1 == y.ne1);
    assert(weight.empty() || (weight.type == quant::TypeId::F32 && weight.ne0 == x.ne0));
    const int64_t n = x.ne0;
    const float* w = weight.empty() ? nullptr : host_f32_row(weight);
    for_rows(x.ne1, n, [&](int64_t r) {
        const float* in = host_f32_row(x, r);
        float* out = host_f32_row(y, r);
        // Squares rounded to float, summed in double: llama.cpp's order, so the scale agrees with
        // its own to the last bit.
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(in[i] * in[i]);
        const float s = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
        if (w) {
            for (int64_t i = 0; i < n; ++i) out[i] = in[i] * s * w[i];
        } else {
            for (int64_t i = 0; i < n; ++i) out[i] = in[i] * s;
        }
    });
}

namespace {

// Per-frequency rotation for one position: angle and magnitude of dimension pair i.
struct RopeTable {
    std::vector<float> cos, sin;
};

// YaRN: the frequency index range [low, high] over which interpolation ramps into
// extrapolation. ref: YaRN (arXiv:2309.00071), section 3.2 ("NTK-by-parts").
void yarn_corr_dims(const RopeParams& p, float& low, float& high) {
    const auto dim_for = [&](float n_rotations) {
        return p.n_rot * std::log(p.orig_ctx / (n_rotations * 2 * std::numbers::pi_v<float>)) /
               (2 * std::log(p.freq_base));
    };
    low = std::max(0.0f, std::floor(dim_for(p.yarn_beta_fast)));
    high = std::min(static_cast<float>(p.n_rot - 1), std::ceil(dim_for(p.yarn_beta_slow)));
}

// Llama 3.1 scaling: low frequencies are divided by the factor, high ones kept, a smooth blend
// in between; returns the divisor of frequency `freq`. ref: Meta llama-models, apply_scaling().
float llama3_divisor(const RopeParams& p, float freq) {
    const float wavelen = 2 * std::numbers::pi_v<float> / freq;
    const float low_wavelen = p.orig_ctx / p.llama3_low_freq_factor;
    const float high_wavelen = p.orig_ctx / p.llama3_high_freq_factor;
    if (wavelen < high_wavelen) return 1.0f;
    if (wavelen > low_wavelen) return p.scaling_factor;
    const float smooth = (p.orig_ctx / wavelen - p.llama3_low_freq_factor) /
                         (p.llama3_high_freq_factor - p.llama3_low_freq_factor);
    return 1.0f / ((1 - smooth) / p.scaling_factor + smooth);
}

void fill_table(const RopeParams& p, int32_t pos, RopeTable& t) {
    const int64_t n_pairs = p.n_rot / 2;
    t.cos.resize(n_pairs);
    t.sin.resize(n_pairs);
    // theta_i = pos * base^(-2i / n_rot), advanced by repeated multiplication in float as
    // llama.cpp does, so angles agree with it to the last bit at long positions.
    const float theta_scale = std::pow(p.freq_base, -2.0f / p.n_rot);
    float low = 0, high = 0;
    if (p.scaling == RopeScalingType::Yarn) yarn_corr_dims(p, low, high);
    float theta = static_cast<float>(pos);
    float freq = 1.0f;
    for (int64_t i = 0; i < n_pairs; ++i, theta *= theta_scale, freq *= theta_scale) {
        float angle = theta;
        float mscale = 1.0f;
        if (!p.freq_factors.empty()) {
            angle = theta / p.freq_factors[i];
        } else if (p.scaling == RopeScalingType::Llama3) {
            angle = theta / llama3_divisor(p, freq);
        } else if (p.scaling == RopeScalingType::Linear) {
            angle = theta / p.scaling_factor;
        }
        if (p.scaling == RopeScalingType::Yarn) {
            const float interp = theta / p.scaling_factor;
            const float ramp = 1.0f - std::clamp((i - low) / std::max(0.001f, high - low), 0.0f, 1.0f);
            angle = interp * (1 - ramp) + theta * ramp;
            mscale = 1.0f + 0.1f * std::log(p.scaling_factor);  // ref: YaRN eq. 22 (sqrt(1/t))
        }
        t.cos[i] = std::cos(angle) * mscale;
        t.sin[i] = std::sin(angle) * mscale;
    }
}

}  // namespace

void CpuBackend::rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& p) {
    assert(x.type == quant::TypeId::F32 && x.ne0 == p.n_head * p.head_dim);
    assert(static_cast<int64_t>(positions.size()) == x.ne1 && p.n_rot <= p.head_dim && p.n_rot % 2 == 0);
    const int64_t half = p.n_rot / 2;
    for_rows(x.ne1, x.ne0, [&](int64_t r) {
        thread_local RopeTable table;
        fill_table(p, positions[r], table);
        float* row = host_f32_row(x, r);
        for (int64_t h = 0; h < p.n_head; ++h) {
            float* v = row + h * p.head_dim;
            for (int64_t i = 0; i < half; ++i) {
                const int64_t i0 = p.neox ? i : 2 * i;
                const int64_t i1 = p.neox ? i + half : 2 * i + 1;
                const float a = v[i0], b = v[i1];
                // llama.cpp writes a*cos - b*sin, and GCC contracts it (host-tuned C++) to one
                // FMA over a rounded b*sin; an explicit fma gives the same bits on any build.
                v[i0] = std::fma(a, table.cos[i], -(b * table.sin[i]));
                v[i1] = std::fma(a, table.sin[i], b * table.cos[i]);
            }
        }
    });
}

}  // namespace deskside::backends::cpu
