// Reference Q4_K and Q5_K: 256-element super-blocks in 8 groups of 32, 4 (Q4_K) or 5 (Q5_K) bits
// per element, each group with a 6-bit scale and a 6-bit min under fp16 super-block d and dmin.
//
// The quantizers follow llama.cpp's reference (used by llama-quantize without an importance
// matrix): an asymmetric search per group weighted by rms(group) + |x|, 6-bit rounding of the
// group scales and mins, then requantization against the stored values.
// ref: ggml/src/ggml-quants.c (quantize_row_q4_K_ref, quantize_row_q5_K_ref, dequantize_row_*),
//      ggml/src/ggml-cpu/quants.c (ggml_vec_dot_q4_K_q8_K_generic, ggml_vec_dot_q5_K_q8_K_generic)
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

constexpr int kGroups = kQKK / 32;

// Searches every group of one super-block and stores d, dmin and the packed 6-bit scales/mins;
// `levels` holds the search's levels.
template <typename Block>
void quantize_k4_scales(const float* x, Block& y, int nmax, float rmin, float rdelta, int nstep, uint8_t* levels) {
    float scales[kGroups];
    float mins[kGroups];
    float max_scale = 0;  // the mins are subtracted, so scales are never negative
    float max_min = 0;
    for (int g = 0; g < kGroups; ++g) {
        const float* xg = x + 32 * g;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += xg[l] * xg[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        float weights[32];
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xg[l]);
        scales[g] = search_asymmetric(32, nmax, xg, weights, levels + 32 * g, &mins[g], rmin, rdelta, nstep, false);
        if (scales[g] > max_scale) max_scale = scales[g];
        if (mins[g] > max_min) max_min = mins[g];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[kGroups];
    uint8_t lm[kGroups];
    for (int g = 0; g < kGroups; ++g) {
        ls[g] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[g])));
        lm[g] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[g])));
    }
    pack_k4_scales(ls, lm, y.scales);
    y.d = fp32_to_fp16(max_scale / 63.f);
    y.dmin = fp32_to_fp16(max_min / 63.f);
}

// Requantizes each group against the scale and min as stored (groups whose scale is 0 keep the
// search's levels).
template <typename Block>
void requantize_k4(const float* x, const Block& y, int nmax, uint8_t* levels) {
    for (int g = 0; g < kGroups; ++g) {
        uint8_t sc, m;
        k4_scale_min(g, y.scales, &sc, &m);
        const float d = fp16_to_fp32(y.d) * static_cast<float>(sc);
        if (d == 0.0f) continue;
        const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
            const int q = nearest_int((x[32 * g + l] + dm) / d);
            levels[32 * g + l] = static_cast<uint8_t>(std::max(0, std::min(nmax, q)));
        }
    }
}

// The levels of a Q4_K super-block: 64 elements per 32 bytes, low nibbles first.
void q4k_levels(const BlockQ4_K& b, uint8_t* out) {
    for (int e = 0; e < kQKK; ++e) {
        const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
        out[e] = (e % 64) < 32 ? byte & 0xF : byte >> 4;
    }
}

// Q5_K: the Q4_K nibbles plus a fifth bit, bit e/32 of qh[e % 32].
void q5k_levels(const BlockQ5_K& b, uint8_t* out) {
    for (int e = 0; e < kQKK; ++e) {
        const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
        const int low = (e % 64) < 32 ? byte & 0xF : byte >> 4;
        out[e] = static_cast<uint8_t>(low | (((b.qh[e % 32] >> (e / 32)) & 1) << 4));
    }
}

template <typename Block, typename LevelsFn>
void dequantize_k4(const Block* x, float* dst, int64_t n, LevelsFn unpack) {
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        uint8_t q[kQKK];
        unpack(x[i], q);
        for (int g = 0; g < kGroups; ++g) {
            uint8_t sc, m;
            k4_scale_min(g, x[i].scales, &sc, &m);
            const float dl = d * static_cast<float>(sc);
            const float ml = dmin * static_cast<float>(m);
            for (int e = 32 * g; e < 32 * g + 32; ++e) dst[i * kQKK + e] = dl * static_cast<float>(q[e]) - ml;
        }
    }
}

template <typename Block, typename LevelsFn>
float dot_k4(const Block* x, const BlockQ8_K* y, int64_t n, LevelsFn unpack) {
    float sum = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t q[kQKK];
        unpack(x[i], q);
        int isum = 0;
        int sum_mins = 0;  // the mins apply to whole groups: they only need the activation sums
        for (int g = 0; g < kGroups; ++g) {
            uint8_t sc, m;
            k4_scale_min(g, x[i].scales, &sc, &m);
            int group = 0;
            for (int e = 32 * g; e < 32 * g + 32; ++e) group += y[i].qs[e] * q[e];
            isum += sc * group;
            sum_mins += m * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
        }
        const float d = fp16_to_fp32(x[i].d) * y[i].d;
        const float dmin = fp16_to_fp32(x[i].dmin) * y[i].d;
        sum += d * static_cast<float>(isum) - dmin * static_cast<float>(sum_mins);
    }
    return sum;
}

}  // namespace

void pack_k4_scales(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
    for (int g = 0; g < kGroups; ++g) {
        if (g < 4) {
            scales[g] = ls[g];
            scales[g + 4] = lm[g];
        } else {
            scales[g + 4] = static_cast<uint8_t>((ls[g] & 0xF) | ((lm[g] & 0xF) << 4));
            scales[g - 4] = static_cast<uint8_t>(scales[g - 4] | ((ls[g] >> 4) << 6));
            scales[g] = static_cast<uint8_t>(scales[g] | ((lm[g] >> 4) << 6));
        }
    }
}

void finish_q4_k(const float* x, uint8_t* levels, BlockQ4_K& y) {
    requantize_k4(x, y, 15, levels);
    for (int e = 0; e < kQKK; e += 64) {
        for (int l = 0; l < 32; ++l) y.qs[e / 2 + l] = static_cast<uint8_t>(levels[e + l] | (levels[e + l + 32] << 4));
    }
}

void finish_q5_k(const float* x, uint8_t* levels, BlockQ5_K& y) {
    requantize_k4(x, y, 31, levels);
    std::memset(y.qh, 0, sizeof(y.qh));
    for (int e = 0; e < kQKK; ++e) {
        if (levels[e] > 15) y.qh[e % 32] = static_cast<uint8_t>(y.qh[e % 32] | (1 << (e / 32)));
    }
    for (int e = 0; e < kQKK; e += 64) {
        for (int l = 0; l < 32; ++l) {
            y.qs[e / 2 + l] = static_cast<uint8_t>((levels[e + l] & 0xF) | ((levels[e + l + 32] & 0xF) << 4));
        }
    }
}

// ---- Q4_K ---------------------------------------------------------------------------------

void from_float_q4_k(const float* src, void* dst, int64_t n) {
    auto* blocks = static_cast<BlockQ4_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t levels[kQKK];
        quantize_k4_scales(src + i * kQKK, blocks[i], 15, -1.f, 0.1f, 20, levels);
        finish_q4_k(src + i * kQKK, levels, blocks[i]);
    }
}

void to_float_q4_k(const void* src, float* dst, int64_t n) {
    dequantize_k4(static_cast<const BlockQ4_K*>(src), dst, n, q4k_levels);
}

float vec_dot_q4_k(int64_t n, const void* w, const void* a) {
    return dot_k4(static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(a), n, q4k_levels);
}

// ---- Q5_K ---------------------------------------------------------------------------------

void from_float_q5_k(const float* src, void* dst, int64_t n) {
    auto* blocks = static_cast<BlockQ5_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t levels[kQKK];
        quantize_k4_scales(src + i * kQKK, blocks[i], 31, -0.5f, 0.1f, 15, levels);
        finish_q5_k(src + i * kQKK, levels, blocks[i]);
    }
}

void to_float_q5_k(const void* src, float* dst, int64_t n) {
    dequantize_k4(static_cast<const BlockQ5_K*>(src), dst, n, q5k_levels);
}

float vec_dot_q5_k(int64_t n, const void* w, const void* a) {
    return dot_k4(static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(a), n, q5k_levels);
}

}  // namespace deskside::quant::ref
