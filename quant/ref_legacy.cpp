// Reference Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1: blocks of 32 elements with one fp16 scale
// (and an fp16 offset for the _1 types).
//
// The quantizers repeat llama.cpp's reference arithmetic operation for operation (same
// truncating casts, same roundf) so that quantizing an F32 tensor reproduces llama-quantize's
// bytes. The dots multiply integers inside a block and apply the scales once per block.
// ref: ggml/src/ggml-quants.c (quantize_row_q4_0_ref ... quantize_row_q8_1_ref),
//      ggml/src/ggml-cpu/quants.c (ggml_vec_dot_q4_0_q8_0_generic ...)
#include "quant/strict_fp.h"  // first: keep a*b+c unfused, as llama.cpp's reference build does

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/block_pack.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/reference.h"

namespace deskside::quant::ref {
namespace {

// The element of largest magnitude, with its sign (the first one on ties).
float signed_absmax(const float* x, int n) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

void min_max(const float* x, int n, float* min, float* max) {
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < n; ++j) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

float absmax(const float* x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
    return amax;
}

int low_nibble(const uint8_t* qs, int j) { return j < kQK / 2 ? qs[j] & 0xF : qs[j - kQK / 2] >> 4; }

int fifth_bit(const uint8_t* qh_bytes, int j) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
    return static_cast<int>((qh >> j) & 1) << 4;
}

}  // namespace

uint32_t high_bits(const uint8_t* q) {
    uint32_t qh = 0;
    for (int j = 0; j < kQK; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    return qh;
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
    for (int j = 0; j < kQK / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + kQK / 2] & 0xF) << 4));
}

// ---- Q4_0 ---------------------------------------------------------------------------------

void from_float_q4_0(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ4_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const float d = signed_absmax(x, kQK) / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint8_t q[kQK];
        for (int j = 0; j < kQK; ++j) q[j] = static_cast<uint8_t>(std::min(15, static_cast<int>(x[j] * id + 8.5f)));
        pack_nibbles(q, y[i].qs);
    }
}

void to_float_q4_0(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ4_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = static_cast<float>(low_nibble(x[i].qs, j) - 8) * d;
    }
}

float vec_dot_q4_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK; ++j) sumi += (low_nibble(x[i].qs, j) - 8) * y[i].qs[j];
        sum += static_cast<float>(sumi) * fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d);
    }
    return sum;
}

// ---- Q4_1 ---------------------------------------------------------------------------------

void from_float_q4_1(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ4_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        float min, max;
        min_max(x, kQK, &min, &max);
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        uint8_t q[kQK];
        for (int j = 0; j < kQK; ++j) {
            q[j] = static_cast<uint8_t>(std::min(15, static_cast<int>((x[j] - min) * id + 0.5f)));
        }
        pack_nibbles(q, y[i].qs);
    }
}

void to_float_q4_1(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ4_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = static_cast<float>(low_nibble(x[i].qs, j)) * d + m;
    }
}

float vec_dot_q4_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK; ++j) sumi += low_nibble(x[i].qs, j) * y[i].qs[j];
        sum += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * static_cast<float>(sumi) +
               fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    return sum;
}

// ---- Q5_0 ---------------------------------------------------------------------------------

void from_float_q5_0(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ5_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const float d = signed_absmax(x, kQK) / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint8_t q[kQK];
        for (int j = 0; j < kQK; ++j) q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(x[j] * id + 16.5f)));
        pack_nibbles(q, y[i].qs);
        const uint32_t qh = high_bits(q);
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void to_float_q5_0(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ5_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) {
            dst[i * kQK + j] = static_cast<float>((low_nibble(x[i].qs, j) | fifth_bit(x[i].qh, j)) - 16) * d;
        }
    }
}

float vec_dot_q5_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK; ++j) sumi += ((low_nibble(x[i].qs, j) | fifth_bit(x[i].qh, j)) - 16) * y[i].qs[j];
        sum += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * static_cast<float>(sumi);
    }
    return sum;
}

// ---- Q5_1 ---------------------------------------------------------------------------------

void from_float_q5_1(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ5_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        float min, max;
        min_max(x, kQK, &min, &max);
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        uint8_t q[kQK];
        for (int j = 0; j < kQK; ++j) q[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
        pack_nibbles(q, y[i].qs);
        const uint32_t qh = high_bits(q);
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void to_float_q5_1(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ5_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < kQK; ++j) {
            dst[i * kQK + j] = static_cast<float>(low_nibble(x[i].qs, j) | fifth_bit(x[i].qh, j)) * d + m;
        }
    }
}

float vec_dot_q5_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK; ++j) sumi += (low_nibble(x[i].qs, j) | fifth_bit(x[i].qh, j)) * y[i].qs[j];
        sum += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * static_cast<float>(sumi) +
               fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    return sum;
}

// ---- Q8_0 ---------------------------------------------------------------------------------

void from_float_q8_0(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const float d = absmax(x, kQK) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    }
}

void to_float_q8_0(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ8_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

float vec_dot_q8_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK; ++j) sumi += x[i].qs[j] * y[i].qs[j];
        sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sum;
}

// ---- Q8_1 (activations only in llama.cpp; the dot is here so every traits entry has one) --

void from_float_q8_1(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const float d = absmax(x, kQK) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) {
            y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
    }
}

void to_float_q8_1(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ8_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

float vec_dot_q8_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK; ++j) sumi += x[i].qs[j] * y[i].qs[j];
        sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sum;
}

}  // namespace deskside::quant::ref
