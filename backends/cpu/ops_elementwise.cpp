// CPU element-wise ops: silu, gelu, add, mul, scale.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/convert_f16.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/gelu_table.h"
#include "quant/float16.h"

namespace deskside::backends::cpu {

namespace {

template <class Op>
void binary(const Tensor& a, const Tensor& b, const Tensor& y, Op op, auto& for_rows) {
    assert(a.ne0 == b.ne0 && a.ne0 == y.ne0 && a.ne1 == y.ne1 && (b.ne1 == a.ne1 || b.ne1 == 1));
    for_rows(a.ne1, a.ne0, [&](int64_t r) {
        const float* pa = host_f32_row(a, r);
        const float* pb = host_f32_row(b, b.ne1 == 1 ? 0 : r);
        float* py = host_f32_row(y, r);
        for (int64_t i = 0; i < a.ne0; ++i) py[i] = op(pa[i], pb[i]);
    });
}

}  // namespace

void CpuBackend::silu(const Tensor& x, const Tensor& y) {
    assert(x.ne0 == y.ne0 && x.ne1 == y.ne1);
    for_rows(x.ne1, x.ne0, [&](int64_t r) {
        const float* in = host_f32_row(x, r);
        float* out = host_f32_row(y, r);
        for (int64_t i = 0; i < x.ne0; ++i) out[i] = in[i] / (1.0f + std::exp(-in[i]));
    });
}

// llama.cpp's CPU backend evaluates GELU from a table indexed by x rounded to F16 and stores the
// result as F16 (saturating to 0 and x beyond |x| >= 10); Gemma's logits match it only if we
// round the same way, so we do. ref: ggml-cpu vec.h (GGML_GELU_FP16). The table holds, for every
// F16 input, the F16-rounded tanh formula evaluated on it, so a lookup gives the bits the formula
// gave per element, without a tanhf per element (which was a quarter of a Gemma prompt's time).
void CpuBackend::gelu(const Tensor& x, const Tensor& y) {
    assert(x.ne0 == y.ne0 && x.ne1 == y.ne1);
    static const std::vector<float> table = gelu_f16_table();  // backends/gelu_table.h, shared with Vulkan
    // The table indices come from the row converter (F16C where the CPU has it: the same bits as
    // quant::fp32_to_fp16, about 20x faster; the scalar conversion was most of this op's time).
    const quant::FromFloatFn to_f16 = best_f16_converter();
    for_rows(x.ne1, x.ne0, [&](int64_t r) {
        const float* in = host_f32_row(x, r);
        float* out = host_f32_row(y, r);
        constexpr int64_t kChunk = 256;
        uint16_t index[kChunk];
        for (int64_t c = 0; c < x.ne0; c += kChunk) {
            const int64_t n = std::min(kChunk, x.ne0 - c);
            to_f16(in + c, index, n);
            for (int64_t i = 0; i < n; ++i) {
                const float v = in[c + i];
                if (v <= -kGeluSaturation) out[c + i] = 0.0f;
                else if (v >= kGeluSaturation) out[c + i] = v;
                else out[c + i] = table[index[i]];
            }
        }
    });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, const Tensor& y) {
    auto fr = [this](int64_t n, int64_t e, auto&& fn) { for_rows(n, e, fn); };
    binary(a, b, y, [](float u, float v) { return u + v; }, fr);
}

void CpuBackend::mul(const Tensor& a, const Tensor& b, const Tensor& y) {
    auto fr = [this](int64_t n, int64_t e, auto&& fn) { for_rows(n, e, fn); };
    binary(a, b, y, [](float u, float v) { return u * v; }, fr);
}

void CpuBackend::scale(const Tensor& x, float s, const Tensor& y) {
    assert(x.ne0 == y.ne0 && x.ne1 == y.ne1);
    for_rows(x.ne1, x.ne0, [&](int64_t r) {
        const float* in = host_f32_row(x, r);
        float* out = host_f32_row(y, r);
        for (int64_t i = 0; i < x.ne0; ++i) out[i] = in[i] * s;
    });
}

}  // namespace deskside::backends::cpu
