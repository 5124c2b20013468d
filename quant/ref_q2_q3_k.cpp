// Reference Q2_K and Q3_K: 256-element super-blocks in 16 groups of 16, 2 bits per element
// (plus one high bit for Q3_K), with 4-bit (Q2_K: scale and min) or 6-bit (Q3_K: signed scale)
// group scales under one fp16 super-block scale.
//
// The quantizers follow llama.cpp's reference (used by llama-quantize without an importance
// matrix) step by step: search each group, quantize the group scales, then requantize every
// element against the rounded scales.
// ref: ggml/src/ggml-quants.c (quantize_row_q2_K_ref, quantize_row_q3_K_ref, dequantize_row_*),
//      ggml/src/ggml-cpu/quants.c (ggml_vec_dot_q2_K_q8_K_generic, ggml_vec_dot_q3_K_q8_K_generic)
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

// The 2-bit fields of a super-block: within each 128-element half, byte l of that half's 32
// holds elements l, l+32, l+64, l+96 in bits 0-1, 2-3, 4-5, 6-7.
void unpack_two_bits(const uint8_t* qs, uint8_t* out) {
    for (int e = 0; e < kQKK; ++e) out[e] = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

void pack_two_bits(const uint8_t* levels, uint8_t* qs) {
    for (int half = 0; half < kQKK; half += 128) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t* q = levels + half + l;
            qs[half / 4 + l] = static_cast<uint8_t>(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
        }
    }
}

// Q3_K's signed values (-4..3): the 2-bit field, minus 4 where the element's high bit (bit e/32
// of hmask[e % 32]) is clear.
void q3k_values(const BlockQ3_K& b, int8_t* out) {
    uint8_t low[kQKK];
    unpack_two_bits(b.qs, low);
    for (int e = 0; e < kQKK; ++e) out[e] = static_cast<int8_t>(low[e] - (((b.hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4));
}

}  // namespace

void finish_q2_k(const float* x, uint8_t* levels, BlockQ2_K& y) {
    for (int g = 0; g < kQKK / 16; ++g) {
        const float d = fp16_to_fp32(y.d) * static_cast<float>(y.scales[g] & 0xF);
        if (d == 0.0f) continue;
        const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(y.scales[g] >> 4);
        for (int l = 0; l < 16; ++l) {
            const int q = nearest_int((x[16 * g + l] + dm) / d);
            levels[16 * g + l] = static_cast<uint8_t>(std::max(0, std::min(3, q)));
        }
    }
    pack_two_bits(levels, y.qs);
}

void pack_q3_k_scales(const int8_t* biased, uint8_t* scales) {
    std::memset(scales, 0, 12);
    for (int g = 0; g < kQKK / 16; ++g) {
        const int8_t l = biased[g];
        if (g < 8) {
            scales[g] = static_cast<uint8_t>(l & 0xF);
        } else {
            scales[g - 8] = static_cast<uint8_t>(scales[g - 8] | ((l & 0xF) << 4));
        }
        scales[8 + g % 4] = static_cast<uint8_t>(scales[8 + g % 4] | ((l >> 4) << (2 * (g / 4))));
    }
}

void finish_q3_k(const float* x, int8_t* levels, BlockQ3_K& y) {
    for (int g = 0; g < kQKK / 16; ++g) {
        const float d = fp16_to_fp32(y.d) * static_cast<float>(q3k_scale(g, y.scales));
        if (d == 0.0f) continue;
        for (int l = 0; l < 16; ++l) {
            const int q = nearest_int(x[16 * g + l] / d);
            levels[16 * g + l] = static_cast<int8_t>(std::max(-4, std::min(3, q)) + 4);
        }
    }
    std::memset(y.hmask, 0, sizeof(y.hmask));
    uint8_t low[kQKK];
    for (int e = 0; e < kQKK; ++e) {
        low[e] = static_cast<uint8_t>(levels[e] & 3);
        if (levels[e] > 3) y.hmask[e % 32] = static_cast<uint8_t>(y.hmask[e % 32] | (1 << (e / 32)));
    }
    pack_two_bits(low, y.qs);
}

// ---- Q2_K ---------------------------------------------------------------------------------

void from_float_q2_k(const float* src, void* dst, int64_t n) {
    constexpr float kScaleLevels = 15.f;
    auto* blocks = static_cast<BlockQ2_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float* x = src + i * kQKK;
        BlockQ2_K& y = blocks[i];
        uint8_t levels[kQKK];
        float scales[kQKK / 16];
        float mins[kQKK / 16];
        float max_scale = 0;  // the mins are subtracted, so scales are never negative
        float max_min = 0;
        for (int g = 0; g < kQKK / 16; ++g) {
            float weights[16];
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * g + l]);
            scales[g] = search_asymmetric(16, 3, x + 16 * g, weights, levels + 16 * g, &mins[g], -0.5f, 0.1f, 15, true);
            if (scales[g] > max_scale) max_scale = scales[g];
            if (mins[g] > max_min) max_min = mins[g];
        }
        if (max_scale > 0) {
            const float iscale = kScaleLevels / max_scale;
            for (int g = 0; g < kQKK / 16; ++g) y.scales[g] = static_cast<uint8_t>(nearest_int(iscale * scales[g]));
            y.d = fp32_to_fp16(max_scale / kScaleLevels);
        } else {
            std::fill(std::begin(y.scales), std::end(y.scales), uint8_t{0});
            y.d = fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = kScaleLevels / max_min;
            for (int g = 0; g < kQKK / 16; ++g) {
                y.scales[g] = static_cast<uint8_t>(y.scales[g] | (nearest_int(iscale * mins[g]) << 4));
            }
            y.dmin = fp32_to_fp16(max_min / kScaleLevels);
        } else {
            y.dmin = fp32_to_fp16(0.f);
        }
        finish_q2_k(x, levels, y);
    }
}

void to_float_q2_k(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ2_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        uint8_t q[kQKK];
        unpack_two_bits(x[i].qs, q);
        for (int e = 0; e < kQKK; ++e) {
            const uint8_t sc = x[i].scales[e / 16];
            const float dl = d * static_cast<float>(sc & 0xF);
            const float ml = dmin * static_cast<float>(sc >> 4);
            dst[i * kQKK + e] = dl * static_cast<float>(q[e]) - ml;
        }
    }
}

float vec_dot_q2_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t q[kQKK];
        unpack_two_bits(x[i].qs, q);
        // The mins apply to whole groups, so they only need the activation group sums.
        int sum_mins = 0;
        for (int g = 0; g < kQKK / 16; ++g) sum_mins += y[i].bsums[g] * (x[i].scales[g] >> 4);
        int isum = 0;
        for (int g = 0; g < kQKK / 16; ++g) {
            int group = 0;
            for (int e = 16 * g; e < 16 * g + 16; ++e) group += y[i].qs[e] * q[e];
            isum += (x[i].scales[g] & 0xF) * group;
        }
        const float dall = y[i].d * fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
        sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(sum_mins);
    }
    return sum;
}

// ---- Q3_K ---------------------------------------------------------------------------------

void from_float_q3_k(const float* src, void* dst, int64_t n) {
    auto* blocks = static_cast<BlockQ3_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float* x = src + i * kQKK;
        BlockQ3_K& y = blocks[i];
        int8_t levels[kQKK];
        float scales[kQKK / 16];
        float max_scale = 0;  // signed: the group scale of largest magnitude
        float amax = 0;
        for (int g = 0; g < kQKK / 16; ++g) {
            scales[g] = search_symmetric_refined(16, 4, x + 16 * g, levels + 16 * g);
            const float scale = std::fabs(scales[g]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[g];
            }
        }
        std::memset(y.scales, 0, sizeof(y.scales));
        if (max_scale != 0.0f) {
            const float iscale = -32.f / max_scale;
            int8_t biased[kQKK / 16];
            for (int g = 0; g < kQKK / 16; ++g) {
                const int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[g]));
                biased[g] = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
            }
            pack_q3_k_scales(biased, y.scales);
            y.d = fp32_to_fp16(1 / iscale);
        } else {
            y.d = fp32_to_fp16(0.f);
        }
        finish_q3_k(x, levels, y);
    }
}

void to_float_q3_k(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ3_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        int8_t v[kQKK];
        q3k_values(x[i], v);
        for (int e = 0; e < kQKK; ++e) {
            const float dl = d * static_cast<float>(q3k_scale(e / 16, x[i].scales));
            dst[i * kQKK + e] = dl * static_cast<float>(v[e]);
        }
    }
}

float vec_dot_q3_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ3_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int8_t v[kQKK];
        q3k_values(x[i], v);
        int isum = 0;
        for (int g = 0; g < kQKK / 16; ++g) {
            int group = 0;
            for (int e = 16 * g; e < 16 * g + 16; ++e) group += y[i].qs[e] * v[e];
            isum += q3k_scale(g, x[i].scales) * group;
        }
        sum += (fp16_to_fp32(x[i].d) * y[i].d) * static_cast<float>(isum);
    }
    return sum;
}

}  // namespace deskside::quant::ref
