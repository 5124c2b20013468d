// See quantize_weighted.h. llama.cpp's quantize_row_*_impl, reproduced operation for operation (the
// order of every float sum, nearest_int, the candidate scales) so that a row quantized here equals
// llama-quantize --imatrix's bytes; the searches live in scale_search.cpp and the packing steps
// beside the reference quantizers (block_pack.h), which these share.
//
// Every weighted quantizer turns the importance matrix's per-column weight qw into a per-element
// weight qw * sqrt(sigma2 + x^2), sigma2 being a mean square of the row or super-block (how it is
// taken differs per type, as below), except Q6_K, whose group search takes qw as is.
// ref: ggml/src/ggml-quants.c (quantize_row_q4_0_impl ... quantize_row_q6_K_impl,
//      quantize_row_iq4_nl_impl, quantize_iq4_nl, quantize_iq4_xs)
#include "quant/strict_fp.h"  // first: keep a*b+c unfused, as llama.cpp's reference build does

#include "quant/quantize_weighted.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "quant/block_pack.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/scale_search.h"

namespace deskside::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this a group counts as all zeros

float sum_squares(const float* x, int64_t n) {
    float s = 0;
    for (int64_t j = 0; j < n; ++j) s += x[j] * x[j];
    return s;
}

// w_j = qw_j * sqrt(sigma2 + x_j^2) for n elements.
void element_weights(const float* x, const float* qw, float sigma2, int n, float* w) {
    for (int j = 0; j < n; ++j) w[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

float sum_of(const float* w, int n) {
    float s = 0;
    for (int j = 0; j < n; ++j) s += w[j];
    return s;
}

// ---- 32-element blocks: sigma2 is the mean square of the whole row --------------------------

void quantize_q4_0(const float* x, void* dst, int64_t n, const float* qw) {
    auto* y = static_cast<BlockQ4_0*>(dst);
    const float sigma2 = sum_squares(x, n) / static_cast<float>(n);
    for (int64_t ib = 0; ib < n / kQK; ++ib) {
        const float* xb = x + ib * kQK;
        float w[kQK];
        element_weights(xb, qw + ib * kQK, sigma2, kQK, w);
        int8_t levels[kQK];  // symmetric: level - 8 is the value, in [0, 16)
        y[ib].d = fp32_to_fp16(search_symmetric(kQK, 8, xb, w, levels));
        uint8_t q[kQK];
        for (int j = 0; j < kQK; ++j) q[j] = static_cast<uint8_t>(levels[j]);
        ref::pack_nibbles(q, y[ib].qs);
    }
}

void quantize_q5_0(const float* x, void* dst, int64_t n, const float* qw) {
    auto* y = static_cast<BlockQ5_0*>(dst);
    const float sigma2 = sum_squares(x, n) / static_cast<float>(n);
    for (int64_t ib = 0; ib < n / kQK; ++ib) {
        const float* xb = x + ib * kQK;
        float w[kQK];
        element_weights(xb, qw + ib * kQK, sigma2, kQK, w);
        int8_t levels[kQK];  // level - 16 is the value, in [0, 32)
        y[ib].d = fp32_to_fp16(search_symmetric(kQK, 16, xb, w, levels));
        uint8_t q[kQK];
        for (int j = 0; j < kQK; ++j) q[j] = static_cast<uint8_t>(levels[j]);
        ref::pack_nibbles(q, y[ib].qs);
        const uint32_t qh = ref::high_bits(q);
        std::memcpy(y[ib].qh, &qh, sizeof(qh));
    }
}

// Q4_1 / Q5_1: the asymmetric search; the block's offset m is minus the search's min.
template <typename Block>
void quantize_legacy_offset(const float* x, void* dst, int64_t n, const float* qw, int nmax) {
    auto* y = static_cast<Block*>(dst);
    const float sigma2 = sum_squares(x, n) / static_cast<float>(n);
    for (int64_t ib = 0; ib < n / kQK; ++ib) {
        const float* xb = x + ib * kQK;
        float w[kQK];
        element_weights(xb, qw + ib * kQK, sigma2, kQK, w);
        uint8_t q[kQK];
        float min;
        const float d = search_asymmetric(kQK, nmax, xb, w, q, &min, -0.9f, 0.05f, 36, false);
        y[ib].d = fp32_to_fp16(d);
        y[ib].m = fp32_to_fp16(-min);
        ref::pack_nibbles(q, y[ib].qs);
        if constexpr (std::is_same_v<Block, BlockQ5_1>) {
            const uint32_t qh = ref::high_bits(q);
            std::memcpy(y[ib].qh, &qh, sizeof(qh));
        }
    }
}

void quantize_q4_1(const float* x, void* dst, int64_t n, const float* qw) {
    quantize_legacy_offset<BlockQ4_1>(x, dst, n, qw, 15);
}

void quantize_q5_1(const float* x, void* dst, int64_t n, const float* qw) {
    quantize_legacy_offset<BlockQ5_1>(x, dst, n, qw, 31);
}

// ---- K-quants: sigma2 is the mean square of the super-block (doubled, except for Q2_K) -----

void quantize_q2_k(const float* src, void* dst, int64_t n, const float* weights) {
    constexpr int kGroups = kQKK / 16;
    auto* blocks = static_cast<BlockQ2_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float* x = src + i * kQKK;
        const float* qw = weights + i * kQKK;
        BlockQ2_K& y = blocks[i];
        const float sigma2 = sum_squares(x, kQKK) / static_cast<float>(kQKK);
        uint8_t levels[kQKK];
        float scales[kGroups], mins[kGroups], group_weight[kGroups];
        for (int g = 0; g < kGroups; ++g) {
            float w[16];
            element_weights(x + 16 * g, qw + 16 * g, sigma2, 16, w);
            group_weight[g] = sum_of(w, 16);
            scales[g] = search_asymmetric(16, 3, x + 16 * g, w, levels + 16 * g, &mins[g], -0.9f, 0.05f, 36, false);
        }
        uint8_t ls[kGroups], lm[kGroups];
        y.d = fp32_to_fp16(search_unsigned_refined(kGroups, 15, scales, group_weight, ls));
        y.dmin = fp32_to_fp16(search_unsigned_refined(kGroups, 15, mins, group_weight, lm));
        for (int g = 0; g < kGroups; ++g) y.scales[g] = static_cast<uint8_t>(ls[g] | (lm[g] << 4));
        ref::finish_q2_k(x, levels, y);
    }
}

void quantize_q3_k(const float* src, void* dst, int64_t n, const float* weights) {
    constexpr int kGroups = kQKK / 16;
    auto* blocks = static_cast<BlockQ3_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float* x = src + i * kQKK;
        const float* qw = weights + i * kQKK;
        BlockQ3_K& y = blocks[i];
        const float sigma2 = 2 * sum_squares(x, kQKK) / static_cast<float>(kQKK);
        int8_t levels[kQKK];
        float scales[kGroups], group_weight[kGroups];
        for (int g = 0; g < kGroups; ++g) {
            float w[16];
            element_weights(x + 16 * g, qw + 16 * g, sigma2, 16, w);
            group_weight[g] = sum_of(w, 16);
            scales[g] = search_symmetric(16, 4, x + 16 * g, w, levels + 16 * g);
        }
        // The group scales are signed: the same symmetric search, 6 bits biased by 32.
        int8_t biased[kGroups];
        const float d = search_symmetric(kGroups, 32, scales, group_weight, biased);
        ref::pack_q3_k_scales(biased, y.scales);
        y.d = fp32_to_fp16(d);
        ref::finish_q3_k(x, levels, y);
    }
}

// Q4_K / Q5_K: asymmetric group searches, then the 6-bit scales and mins searched as values of
// their own, weighted by each group's total weight.
template <typename Block>
void search_k4_scales(const float* x, const float* qw, int nmax, Block& y, uint8_t* levels, bool clamp_levels) {
    constexpr int kGroups = kQKK / 32;
    const float sigma2 = 2 * sum_squares(x, kQKK) / static_cast<float>(kQKK);
    float scales[kGroups], mins[kGroups], group_weight[kGroups];
    for (int g = 0; g < kGroups; ++g) {
        float w[32];
        element_weights(x + 32 * g, qw + 32 * g, sigma2, 32, w);
        group_weight[g] = sum_of(w, 32);
        scales[g] = search_asymmetric(32, nmax, x + 32 * g, w, levels + 32 * g, &mins[g], -0.9f, 0.05f, 36, false);
    }
    uint8_t ls[kGroups], lm[kGroups];
    const float d = search_unsigned_refined(kGroups, 63, scales, group_weight, ls);
    const float dmin = search_unsigned_refined(kGroups, 63, mins, group_weight, lm);
    if (clamp_levels) {  // llama.cpp clamps Q5_K's (a no-op for finite inputs), not Q4_K's
        for (int g = 0; g < kGroups; ++g) {
            ls[g] = std::min<uint8_t>(63, ls[g]);
            lm[g] = std::min<uint8_t>(63, lm[g]);
        }
    }
    ref::pack_k4_scales(ls, lm, y.scales);
    y.d = fp32_to_fp16(d);
    y.dmin = fp32_to_fp16(dmin);
}

void quantize_q4_k(const float* src, void* dst, int64_t n, const float* weights) {
    auto* blocks = static_cast<BlockQ4_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t levels[kQKK];
        search_k4_scales(src + i * kQKK, weights + i * kQKK, 15, blocks[i], levels, false);
        ref::finish_q4_k(src + i * kQKK, levels, blocks[i]);
    }
}

void quantize_q5_k(const float* src, void* dst, int64_t n, const float* weights) {
    auto* blocks = static_cast<BlockQ5_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t levels[kQKK];
        search_k4_scales(src + i * kQKK, weights + i * kQKK, 31, blocks[i], levels, true);
        ref::finish_q5_k(src + i * kQKK, levels, blocks[i]);
    }
}

void quantize_q6_k(const float* src, void* dst, int64_t n, const float* weights) {
    ref::quantize_q6_k(src, dst, n, weights);
}

// ---- IQ4_NL / IQ4_XS: 4-bit indices into kIq4nlValues -------------------------------------

constexpr int kIq4Tries = 7;  // candidate scales (itry + values[0]) / max, itry in [-7, 7]

// The index of the table value nearest to x (the upper one on ties).
int nearest_iq4_index(float x) {
    const auto& v = kIq4nlValues;
    if (x <= static_cast<float>(v[0])) return 0;
    if (x >= static_cast<float>(v[15])) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < static_cast<float>(v[mid])) hi = mid;
        else lo = mid;
    }
    return x - static_cast<float>(v[hi - 1]) < static_cast<float>(v[hi]) - x ? hi - 1 : hi;
}

// The scale of one group of 32 minimizing the weighted error over the candidates; 0 for an
// all-zero group.
float iq4_group_scale(const float* xb, const float* w) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        const float ax = std::fabs(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < kGroupMaxEps) return 0;
    const float v0 = static_cast<float>(kIq4nlValues[0]);
    // Weighted least squares for the levels one inverse scale picks: sum(w q x) / sum(w q^2).
    auto fit = [&](float id, float* sumqx, float* sumq2) {
        *sumqx = 0;
        *sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const float q = static_cast<float>(kIq4nlValues[nearest_iq4_index(id * xb[j])]);
            *sumqx += w[j] * q * xb[j];
            *sumq2 += w[j] * q * q;
        }
    };
    float sumqx, sumq2;
    fit(1 / (-max / v0), &sumqx, &sumq2);
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -kIq4Tries; itry <= kIq4Tries; ++itry) {
        fit(static_cast<float>(itry + kIq4nlValues[0]) / max, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

// One super-block of n elements (32 for IQ4_NL, 256 for IQ4_XS) with per-column weights qw, or
// x^2 when qw is nullptr. IQ4_XS stores 6-bit group scales under d; IQ4_NL's one group has d.
void quantize_iq4_superblock(const float* x, int n, const float* qw, uint16_t* d_out, uint8_t* qs, uint16_t* scales_h,
                             uint8_t* scales_l) {
    float sigma2 = sum_squares(x, n);
    sigma2 *= 2.f / static_cast<float>(n);
    const int n_groups = n / 32;
    float scales[kQKK / 32];
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < n_groups; ++ib) {
        const float* xb = x + 32 * ib;
        float w[32];
        if (qw) element_weights(xb, qw + 32 * ib, sigma2, 32, w);
        else for (int j = 0; j < 32; ++j) w[j] = xb[j] * xb[j];
        scales[ib] = iq4_group_scale(xb, w);
        if (std::fabs(scales[ib]) > amax_scale) {
            amax_scale = std::fabs(scales[ib]);
            max_scale = scales[ib];
        }
    }
    uint8_t levels[kQKK];
    if (n_groups > 1) {
        // -max_scale / 32 is -0.0 for an all-zero super-block, and stored so.
        const float d = -max_scale / 32;
        *d_out = fp32_to_fp16(d);
        const float id = d != 0.0f ? 1 / d : 0.f;
        *scales_h = 0;
        for (int ib = 0; ib < n_groups; ++ib) {
            int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
            const float dl = d * static_cast<float>(l);
            const float idl = dl != 0.0f ? 1 / dl : 0.f;
            for (int j = 0; j < 32; ++j)
                levels[32 * ib + j] = static_cast<uint8_t>(nearest_iq4_index(idl * x[32 * ib + j]));
            l += 32;
            const auto low = static_cast<uint8_t>(l & 0xF);
            scales_l[ib / 2] = ib % 2 == 0 ? low : static_cast<uint8_t>(scales_l[ib / 2] | (low << 4));
            *scales_h = static_cast<uint16_t>(*scales_h | ((l >> 4) << (2 * (ib % 8))));
        }
    } else {
        *d_out = fp32_to_fp16(scales[0]);
        const float id = scales[0] != 0.0f ? 1 / scales[0] : 0.f;
        for (int j = 0; j < n; ++j) levels[j] = static_cast<uint8_t>(nearest_iq4_index(id * x[j]));
    }
    for (int g = 0; g < n / 32; ++g) ref::pack_nibbles(levels + 32 * g, qs + 16 * g);
}

void quantize_iq4_nl(const float* x, void* dst, int64_t n, const float* qw) {
    auto* y = static_cast<BlockIq4Nl*>(dst);
    for (int64_t ib = 0; ib < n / kQK; ++ib) {
        quantize_iq4_superblock(x + ib * kQK, kQK, qw ? qw + ib * kQK : nullptr, &y[ib].d, y[ib].qs, nullptr, nullptr);
    }
}

void quantize_iq4_xs(const float* x, void* dst, int64_t n, const float* qw) {
    auto* y = static_cast<BlockIq4Xs*>(dst);
    for (int64_t ib = 0; ib < n / kQKK; ++ib) {
        quantize_iq4_superblock(x + ib * kQKK, kQKK, qw ? qw + ib * kQKK : nullptr, &y[ib].d, y[ib].qs, &y[ib].scales_h,
                                y[ib].scales_l);
    }
}

using RowQuantizer = void (*)(const float* x, void* dst, int64_t n_per_row, const float* weights);

struct WeightedQuantizer {
    TypeId type;
    RowQuantizer quantize;
};

constexpr std::array kWeighted{
    WeightedQuantizer{TypeId::Q4_0, quantize_q4_0},     WeightedQuantizer{TypeId::Q4_1, quantize_q4_1},
    WeightedQuantizer{TypeId::Q5_0, quantize_q5_0},     WeightedQuantizer{TypeId::Q5_1, quantize_q5_1},
    WeightedQuantizer{TypeId::Q2_K, quantize_q2_k},     WeightedQuantizer{TypeId::Q3_K, quantize_q3_k},
    WeightedQuantizer{TypeId::Q4_K, quantize_q4_k},     WeightedQuantizer{TypeId::Q5_K, quantize_q5_k},
    WeightedQuantizer{TypeId::Q6_K, quantize_q6_k},     WeightedQuantizer{TypeId::IQ4_NL, quantize_iq4_nl},
    WeightedQuantizer{TypeId::IQ4_XS, quantize_iq4_xs},
};

const WeightedQuantizer* find_weighted(TypeId type) {
    for (const WeightedQuantizer& w : kWeighted) {
        if (w.type == type) return &w;
    }
    return nullptr;
}

}  // namespace

bool has_weighted_quantizer(TypeId type) { return find_weighted(type) != nullptr; }

void quantize_row_weighted(TypeId type, const float* x, void* dst, int64_t n_per_row, const float* weights) {
    const WeightedQuantizer* w = find_weighted(type);
    const bool weights_optional = type == TypeId::IQ4_NL || type == TypeId::IQ4_XS;
    if (w == nullptr || (weights == nullptr && !weights_optional)) {
        throw std::invalid_argument("no importance-weighted quantizer for " + std::string(type_info(type).name) +
                                    (weights ? "" : " without weights"));
    }
    w->quantize(x, dst, n_per_row, weights);
}

}  // namespace deskside::quant
