// Reference Q6_K (weights: 16 groups of 16, 6 bits per element, signed 8-bit group scales under
// an fp16 super-block scale) and Q8_K (the activation format every K-quant is dotted against:
// 8 bits per element, one float scale, and the sum of each group of 16).
// ref: ggml/src/ggml-quants.c (quantize_row_q6_K_ref, quantize_row_q8_K_ref, dequantize_row_*),
//      ggml/src/ggml-cpu/quants.c (ggml_vec_dot_q6_K_q8_K_generic)
#include "quant/strict_fp.h"  // first: keep a*b+c unfused, as llama.cpp's reference build does

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/block_pack.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/reference.h"
#include "quant/scale_search.h"

namespace deskside::quant::ref {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this the super-block counts as all zeros

// The signed values (level - 32, -32..31) of a super-block. Each 128-element half uses 64 bytes
// of ql and 32 of qh; its quarter k (32 elements) takes the low (k=0,1) or high (k=2,3) nibbles
// of ql[0..31] (k even) or ql[32..63] (k odd), and bits 2k..2k+1 of qh.
void q6k_values(const BlockQ6_K& b, int8_t* out) {
    for (int e = 0; e < kQKK; ++e) {
        const uint8_t* ql = b.ql + 64 * (e / 128);
        const uint8_t* qh = b.qh + 32 * (e / 128);
        const int quarter = (e % 128) / 32;
        const int l = e % 32;
        const uint8_t low_byte = ql[l + 32 * (quarter & 1)];
        const int low = quarter < 2 ? low_byte & 0xF : low_byte >> 4;
        out[e] = static_cast<int8_t>((low | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32);
    }
}

}  // namespace

void finish_q6_k(const float* x, int8_t* levels, BlockQ6_K& y) {
    for (int g = 0; g < kQKK / 16; ++g) {
        const float d = fp16_to_fp32(y.d) * static_cast<float>(y.scales[g]);
        if (d == 0.0f) continue;
        for (int l = 0; l < 16; ++l) {
            const int q = nearest_int(x[16 * g + l] / d);
            levels[16 * g + l] = static_cast<int8_t>(std::max(-32, std::min(31, q)) + 32);
        }
    }
    for (int half = 0; half < kQKK; half += 128) {
        uint8_t* ql = y.ql + half / 2;
        uint8_t* qh = y.qh + half / 4;
        for (int l = 0; l < 32; ++l) {
            const int8_t* q = levels + half + l;
            ql[l] = static_cast<uint8_t>((q[0] & 0xF) | ((q[64] & 0xF) << 4));
            ql[l + 32] = static_cast<uint8_t>((q[32] & 0xF) | ((q[96] & 0xF) << 4));
            qh[l] = static_cast<uint8_t>((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
        }
    }
}

// ---- Q6_K ---------------------------------------------------------------------------------

void from_float_q6_k(const float* src, void* dst, int64_t n) { quantize_q6_k(src, dst, n, nullptr); }

void quantize_q6_k(const float* src, void* dst, int64_t n, const float* weights) {
    auto* blocks = static_cast<BlockQ6_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float* x = src + i * kQKK;
        BlockQ6_K& y = blocks[i];
        int8_t levels[kQKK];
        float scales[kQKK / 16];
        float max_scale = 0;  // signed: the group scale of largest magnitude
        float max_abs_scale = 0;
        for (int g = 0; g < kQKK / 16; ++g) {
            const float* wg = weights ? weights + i * kQKK + 16 * g : nullptr;
            scales[g] = search_symmetric(16, 32, x + 16 * g, wg, levels + 16 * g);
            const float abs_scale = std::fabs(scales[g]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[g];
            }
        }
        if (max_abs_scale < kGroupMaxEps) {
            std::memset(&y, 0, sizeof(y));
            continue;
        }
        const float iscale = -128.f / max_scale;
        y.d = fp32_to_fp16(1 / iscale);
        for (int g = 0; g < kQKK / 16; ++g) {
            y.scales[g] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[g])));
        }
        finish_q6_k(x, levels, y);
    }
}

void to_float_q6_k(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ6_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        int8_t v[kQKK];
        q6k_values(x[i], v);
        for (int e = 0; e < kQKK; ++e) dst[i * kQKK + e] = d * static_cast<float>(x[i].scales[e / 16]) * static_cast<float>(v[e]);
    }
}

float vec_dot_q6_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int8_t v[kQKK];
        q6k_values(x[i], v);
        int isum = 0;
        for (int g = 0; g < kQKK / 16; ++g) {
            int group = 0;
            for (int e = 16 * g; e < 16 * g + 16; ++e) group += y[i].qs[e] * v[e];
            isum += x[i].scales[g] * group;
        }
        sum += (fp16_to_fp32(x[i].d) * y[i].d) * static_cast<float>(isum);
    }
    return sum;
}

// ---- Q8_K ---------------------------------------------------------------------------------

void from_float_q8_k(const float* src, void* dst, int64_t n) {
    auto* blocks = static_cast<BlockQ8_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float* x = src + i * kQKK;
        BlockQ8_K& y = blocks[i];
        float max = 0;
        float amax = 0;
        for (int e = 0; e < kQKK; ++e) {
            if (std::fabs(x[e]) > amax) {
                amax = std::fabs(x[e]);
                max = x[e];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y, 0, sizeof(y));
            continue;
        }
        // -127 (not -128) keeps every level in [-127, 127], so SIMD kernels may negate freely.
        const float iscale = -127.f / max;
        for (int e = 0; e < kQKK; ++e) y.qs[e] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[e])));
        for (int g = 0; g < kQKK / 16; ++g) {
            int sum = 0;
            for (int e = 16 * g; e < 16 * g + 16; ++e) sum += y.qs[e];
            y.bsums[g] = static_cast<int16_t>(sum);
        }
        y.d = 1 / iscale;
    }
}

void to_float_q8_k(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ8_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        for (int e = 0; e < kQKK; ++e) dst[i * kQKK + e] = x[i].d * static_cast<float>(x[i].qs[e]);
    }
}

float vec_dot_q8_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int isum = 0;
        for (int e = 0; e < kQKK; ++e) isum += x[i].qs[e] * y[i].qs[e];
        sum += (x[i].d * y[i].d) * static_cast<float>(isum);
    }
    return sum;
}

}  // namespace deskside::quant::ref
