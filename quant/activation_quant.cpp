#include "quant/activation_quant.h"

#include <algorithm>
#include <cmath>

#include "quant/blocks.h"
#include "quant/float16.h"

namespace deskside::quant {
namespace {

// One block: d = amax / 127 (stored as fp16), levels = round_half_even(x * (127 / amax)).
// Returns d (as computed, before fp16 rounding) and the sum of the levels.
float quantize_block_x86(const float* x, int8_t* qs, int* level_sum) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
        qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));  // default rounding: half to even
        sum += qs[j];
    }
    *level_sum = sum;
    return amax / 127.f;
}

void q8_0_x86(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sum;
        y[i].d = fp32_to_fp16(quantize_block_x86(src + i * kQK, y[i].qs, &sum));
    }
}

void q8_1_x86(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sum;
        const float d = quantize_block_x86(src + i * kQK, y[i].qs, &sum);
        y[i].d = fp32_to_fp16(d);
        y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
    }
}

}  // namespace

FromFloatFn activation_from_float(TypeId vec_dot_type) {
    if (vec_dot_type == TypeId::Q8_0) return q8_0_x86;
    if (vec_dot_type == TypeId::Q8_1) return q8_1_x86;
    const QuantTraits* t = quant_traits(vec_dot_type);
    return t != nullptr ? t->from_float : nullptr;
}

}  // namespace deskside::quant
