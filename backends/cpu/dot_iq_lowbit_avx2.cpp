// AVX2 dots for the low-bit i-quants against Q8_K activations: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S, IQ1_S, IQ1_M. A 32-element group becomes one vector of unsigned magnitudes (four 64-bit
// or eight 32-bit codebook entries, quant/iq_grids.h) and the activations with the weights' signs
// applied, so one maddubs + madd gives the group's eight int32 lane sums times the scale of each
// 16-element half (lane j: elements 4j .. 4j + 3). IQ1's levels 8 * grid +- 1 are signed and
// take the sign trick instead (quant/iq_lowbit.h explains the levels and why they are exact).
// Each super-block's integer sum is exact, then scaled once by d_w * d_a into 8 float lanes,
// and the type's power of two is applied after the horizontal sum, as the scalar reference does;
// shaders/matmul_q8k.comp repeats this lane order for the Vulkan backend's bits.
// ref: quant/ref_iq_lowbit.cpp
#include <cstring>

#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/dot_isa.h"
#include "quant/blocks.h"
#include "quant/iq_lowbit.h"

namespace deskside::backends::cpu {

using namespace avx2;
using quant::BlockQ8_K;
using quant::kIqSigns;
using quant::kQKK;

namespace {

uint32_t u32_at(const void* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// The 8-bit sign masks of four 7-bit sign indices packed 7 bits apart in `packed`, as one word.
uint32_t signs_from_indices(uint32_t packed) {
    uint32_t signs = 0;
    for (int r = 0; r < 4; ++r) signs |= static_cast<uint32_t>(kIqSigns[(packed >> (7 * r)) & 127]) << (8 * r);
    return signs;
}

// Four 64-bit codebook entries (runs of 8) as one vector, run 0 in the low bytes.
__m256i entries64(uint64_t e0, uint64_t e1, uint64_t e2, uint64_t e3) {
    return _mm256_set_epi64x(static_cast<int64_t>(e3), static_cast<int64_t>(e2), static_cast<int64_t>(e1),
                             static_cast<int64_t>(e0));
}

// One decoded group: unsigned magnitudes, the activations with the weights' signs, the scales.
struct Group {
    __m256i mag, act;
    int scale_lo, scale_hi;
};

// magnitudes and sign bits (bit j = element j negative) of a group with activations q8.
Group signed_group(__m256i mag, uint32_t signs, const int8_t* q8, int scale_lo, int scale_hi) {
    const __m256i sign = _mm256_or_si256(bits_to_bytes(signs), _mm256_set1_epi8(1));  // -1 or +1
    return {mag, _mm256_sign_epi8(load(q8), sign), scale_lo, scale_hi};
}

// IQ1: grid bytes (-1, 0, 1) times 8 plus the per-byte shift sign (-1 or +1), then the sign trick.
Group iq1_group(__m256i grid, __m256i delta, const int8_t* q8, int scale_lo, int scale_hi) {
    const __m256i times8 = _mm256_and_si256(_mm256_slli_epi16(grid, 3), _mm256_set1_epi8(static_cast<char>(0xF8)));
    const __m256i level = _mm256_add_epi8(times8, delta);  // odd, never 0
    return {_mm256_sign_epi8(level, level), _mm256_sign_epi8(load(q8), level), scale_lo, scale_hi};
}

// Eight int32 lanes per super-block, exact; acc += (d_w * d_a) * lanes.
template <typename Block, typename GroupFn>
float dot_iq(int64_t n, const void* w, const void* a, GroupFn group) {
    const auto* x = static_cast<const Block*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
        __m256i isum = _mm256_setzero_si256();
        for (int g = 0; g < kQKK / 32; ++g) {
            const Group grp = group(x[i], g, y[i].qs + 32 * g);
            isum = _mm256_add_epi32(isum, dot_u8_i8_two_scales(grp.mag, grp.act, grp.scale_lo, grp.scale_hi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(quant::iq_d(x[i]) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return quant::kIqDotScale<Block> * hsum(acc);
}

}  // namespace

float vec_dot_iq2_xxs_avx2(int64_t n, const void* w, const void* a) {
    return dot_iq<quant::BlockIq2Xxs>(n, w, a, [](const quant::BlockIq2Xxs& b, int g, const int8_t* q8) {
        const uint32_t grids = u32_at(b.qs + 4 * g), meta = u32_at(b.qs + 4 * g + 2);
        const auto& t = quant::kIq2xxsGrid;
        const __m256i mag = entries64(t[grids & 0xFF], t[(grids >> 8) & 0xFF], t[(grids >> 16) & 0xFF], t[grids >> 24]);
        const int scale = 2 * static_cast<int>(meta >> 28) + 1;
        return signed_group(mag, signs_from_indices(meta), q8, scale, scale);
    });
}

float vec_dot_iq2_xs_avx2(int64_t n, const void* w, const void* a) {
    return dot_iq<quant::BlockIq2Xs>(n, w, a, [](const quant::BlockIq2Xs& b, int g, const int8_t* q8) {
        const uint16_t* q = b.qs + 4 * g;
        const auto& t = quant::kIq2xsGrid;
        const __m256i mag = entries64(t[q[0] & 511], t[q[1] & 511], t[q[2] & 511], t[q[3] & 511]);
        uint32_t signs = 0;
        for (int r = 0; r < 4; ++r) signs |= static_cast<uint32_t>(kIqSigns[q[r] >> 9]) << (8 * r);
        return signed_group(mag, signs, q8, 2 * (b.scales[g] & 0xF) + 1, 2 * (b.scales[g] >> 4) + 1);
    });
}

float vec_dot_iq2_s_avx2(int64_t n, const void* w, const void* a) {
    return dot_iq<quant::BlockIq2S>(n, w, a, [](const quant::BlockIq2S& b, int g, const int8_t* q8) {
        const uint8_t* qs = b.qs + 4 * g;
        const int qh = b.qh[g];
        const auto& t = quant::kIq2sGrid;
        const __m256i mag = entries64(t[qs[0] | (qh << 8 & 0x300)], t[qs[1] | (qh << 6 & 0x300)],
                                      t[qs[2] | (qh << 4 & 0x300)], t[qs[3] | (qh << 2 & 0x300)]);
        return signed_group(mag, u32_at(b.qs + kQKK / 8 + 4 * g), q8, 2 * (b.scales[g] & 0xF) + 1,
                            2 * (b.scales[g] >> 4) + 1);
    });
}

float vec_dot_iq3_xxs_avx2(int64_t n, const void* w, const void* a) {
    return dot_iq<quant::BlockIq3Xxs>(n, w, a, [](const quant::BlockIq3Xxs& b, int g, const int8_t* q8) {
        const uint8_t* qs = b.qs + 8 * g;
        const auto& t = quant::kIq3xxsGrid;
        auto e = [&](int k) { return static_cast<int>(t[qs[k]]); };
        const __m256i mag = _mm256_set_epi32(e(7), e(6), e(5), e(4), e(3), e(2), e(1), e(0));
        const uint32_t meta = u32_at(b.qs + kQKK / 4 + 4 * g);
        const int scale = 2 * static_cast<int>(meta >> 28) + 1;
        return signed_group(mag, signs_from_indices(meta), q8, scale, scale);
    });
}

float vec_dot_iq3_s_avx2(int64_t n, const void* w, const void* a) {
    return dot_iq<quant::BlockIq3S>(n, w, a, [](const quant::BlockIq3S& b, int g, const int8_t* q8) {
        const uint8_t* qs = b.qs + 8 * g;
        const int qh = b.qh[g];
        const auto& t = quant::kIq3sGrid;
        auto e = [&](int k) { return static_cast<int>(t[qs[k] | ((qh >> k) & 1) << 8]); };
        const __m256i mag = _mm256_set_epi32(e(7), e(6), e(5), e(4), e(3), e(2), e(1), e(0));
        const int scale = 2 * ((b.scales[g / 2] >> (4 * (g % 2))) & 0xF) + 1;
        return signed_group(mag, u32_at(b.signs + 4 * g), q8, scale, scale);
    });
}

float vec_dot_iq1_s_avx2(int64_t n, const void* w, const void* a) {
    return dot_iq<quant::BlockIq1S>(n, w, a, [](const quant::BlockIq1S& b, int g, const int8_t* q8) {
        const uint8_t* qs = b.qs + 4 * g;
        const int qh = b.qh[g];
        const auto& t = quant::kIq1sGrid;
        const __m256i grid = entries64(t[qs[0] | (qh << 8 & 0x700)], t[qs[1] | (qh << 5 & 0x700)],
                                       t[qs[2] | (qh << 2 & 0x700)], t[qs[3] | (qh >> 1 & 0x700)]);
        const int scale = 2 * ((qh >> 12) & 7) + 1;
        return iq1_group(grid, _mm256_set1_epi8(qh & 0x8000 ? -1 : 1), q8, scale, scale);
    });
}

float vec_dot_iq1_m_avx2(int64_t n, const void* w, const void* a) {
    return dot_iq<quant::BlockIq1M>(n, w, a, [](const quant::BlockIq1M& b, int g, const int8_t* q8) {
        const uint8_t* qs = b.qs + 4 * g;
        const int qh0 = b.qh[2 * g], qh1 = b.qh[2 * g + 1];
        const auto& t = quant::kIq1sGrid;
        const __m256i grid = entries64(t[qs[0] | (qh0 << 8 & 0x700)], t[qs[1] | (qh0 << 4 & 0x700)],
                                       t[qs[2] | (qh1 << 8 & 0x700)], t[qs[3] | (qh1 << 4 & 0x700)]);
        // The shift's sign per run of 8: bit 3 of each nibble of qh.
        auto delta = [](int nibble) { return nibble & 8 ? int64_t{-1} : int64_t{0x0101010101010101}; };
        const __m256i deltas = _mm256_set_epi64x(delta(qh1 >> 4), delta(qh1), delta(qh0 >> 4), delta(qh0));
        uint16_t sc;
        std::memcpy(&sc, b.scales + 2 * (g / 2), 2);
        const int shift = 6 * (g % 2);
        return iq1_group(grid, deltas, q8, 2 * ((sc >> shift) & 7) + 1, 2 * ((sc >> (shift + 3)) & 7) + 1);
    });
}

}  // namespace deskside::backends::cpu
