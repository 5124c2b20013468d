// CPU rms_norm and rope.
#include <cassert>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/rope_angles.h"

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

// The angles come from backends/rope_angles.h, which the Vulkan backend uses too (same bits).
void fill_table(const RopeParams& p, int32_t pos, RopeTable& t) {
    t.cos.resize(p.n_rot / 2);
    t.sin.resize(p.n_rot / 2);
    rope_angles(p, pos, t.cos.data(), t.sin.data());
}

}  // namespace

void CpuBackend::rope(const Tensor& x, const Tensor& position_tensor, const RopeParams& p) {
    const std::span<const int32_t> positions = host_i32(position_tensor, x.ne1, "rope");
    assert(x.type == quant::TypeId::F32 && x.ne0 == p.n_head * p.head_dim);
    assert(p.n_rot <= p.head_dim && p.n_rot % 2 == 0);
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
