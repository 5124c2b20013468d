// AVX2 dots for the 256-element super-block formats against Q8_K activations: Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K and IQ4_XS. Each super-block's whole integer sum (levels x activations x group
// scales, minus the offset terms computed from the activations' group sums) is exact in int32
// lanes, then scaled once by d_w * d_a.
// ref: quant/ref_q2_q3_k.cpp, quant/ref_q4_q5_k.cpp, quant/ref_q6_q8_k.cpp, quant/ref_iq4.cpp
#include <cmath>

#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/dot_isa.h"
#include "backends/cpu/dot_levels_avx2.h"
#include "quant/blocks.h"

namespace deskside::backends::cpu {

using namespace avx2;
using quant::BlockQ8_K;
using quant::kQKK;

float vec_dot_q2_k_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ2_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const uint8_t* sc = x[i].scales;
        int sum_mins = 0;
        for (int g = 0; g < 16; ++g) sum_mins += y[i].bsums[g] * (sc[g] >> 4);
        __m256i isum = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {
            const __m256i q2 = load(x[i].qs + 32 * half);
            for (int k = 0; k < 4; ++k) {
                const int g = 8 * half + 2 * k;  // the quarter's two groups of 16
                const __m256i u = byte_field(q2, 2 * k, 3);
                isum = _mm256_add_epi32(isum, dot_u8_i8_two_scales(u, load(y[i].qs + 128 * half + 32 * k), sc[g] & 0xF, sc[g + 1] & 0xF));
            }
        }
        const float dall = y[i].d * fp16(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dall), _mm256_cvtepi32_ps(isum), acc);
        mins += y[i].d * fp16(x[i].dmin) * static_cast<float>(sum_mins);
    }
    return hsum(acc) - mins;
}

float vec_dot_q3_k_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ3_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int scales[16];
        int offset = 0;  // levels are stored as value + 4: subtract 4 * scale * group sum
        for (int g = 0; g < 16; ++g) {
            scales[g] = quant::q3k_scale(g, x[i].scales);
            offset += scales[g] * y[i].bsums[g];
        }
        const __m256i hmask = load(x[i].hmask);
        __m256i isum = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {
            const __m256i q2 = load(x[i].qs + 32 * half);
            for (int k = 0; k < 4; ++k) {
                const int g = 8 * half + 2 * k;
                const __m256i high = _mm256_slli_epi16(byte_field(hmask, 4 * half + k, 1), 2);
                const __m256i u = _mm256_or_si256(byte_field(q2, 2 * k, 3), high);  // value + 4, 0..7
                isum = _mm256_add_epi32(isum, dot_u8_i8_two_scales(u, load(y[i].qs + 128 * half + 32 * k), scales[g], scales[g + 1]));
            }
        }
        isum = add_lane0(isum, -4 * offset);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum(acc);
}

namespace {

// Q4_K and Q5_K: 8 groups of 32 with 6-bit scales and mins; `levels(i, chunk)` gives the 64
// unsigned levels of chunk 0..3 as (low group, high group) vectors.
template <typename Block, typename LevelsFn>
float dot_k4(int64_t n, const Block* x, const BlockQ8_K* y, LevelsFn levels) {
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t sc[8], m[8];
        int sum_mins = 0;
        for (int g = 0; g < 8; ++g) {
            quant::k4_scale_min(g, x[i].scales, &sc[g], &m[g]);
            sum_mins += m[g] * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
        }
        __m256i isum = _mm256_setzero_si256();
        for (int chunk = 0; chunk < 4; ++chunk) {
            __m256i lo, hi;
            levels(i, chunk, &lo, &hi);
            const int8_t* q8 = y[i].qs + 64 * chunk;
            isum = _mm256_add_epi32(isum, dot_u8_i8_two_scales(lo, load(q8), sc[2 * chunk], sc[2 * chunk]));
            isum = _mm256_add_epi32(isum, dot_u8_i8_two_scales(hi, load(q8 + 32), sc[2 * chunk + 1], sc[2 * chunk + 1]));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
        // An explicit fma (what the compiler made of `mins += a * b * c` before) pins the
        // rounding that the tiled kernel in gemm_kquant_avx2.cpp must repeat.
        mins = std::fma(fp16(x[i].dmin) * y[i].d, static_cast<float>(sum_mins), mins);
    }
    return hsum(acc) - mins;
}

}  // namespace

float vec_dot_q4_k_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ4_K*>(w);
    return dot_k4(n, x, static_cast<const BlockQ8_K*>(a), [&](int64_t i, int chunk, __m256i* lo, __m256i* hi) {
        q4_k_levels(x[i], chunk, lo, hi);
    });
}

float vec_dot_q5_k_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ5_K*>(w);
    return dot_k4(n, x, static_cast<const BlockQ8_K*>(a), [&](int64_t i, int chunk, __m256i* lo, __m256i* hi) {
        const __m256i q4 = load(x[i].qs + 32 * chunk);
        const __m256i qh = load(x[i].qh);
        *lo = _mm256_or_si256(_mm256_and_si256(q4, _mm256_set1_epi8(0x0F)), _mm256_slli_epi16(byte_field(qh, 2 * chunk, 1), 4));
        *hi = _mm256_or_si256(byte_field(q4, 4, 0x0F), _mm256_slli_epi16(byte_field(qh, 2 * chunk + 1, 1), 4));
    });
}

float vec_dot_q6_k_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const int8_t* sc = x[i].scales;
        __m256i isum = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {
            for (int k = 0; k < 4; ++k) {
                const int g = 8 * half + 2 * k;
                // Signed values (level - 32) in every lane: each int32 lane then holds its own
                // elements' sum, at most 8 x 4 x 32 x 127 x 128 = 16646144 < 2^24, so its conversion
                // to float is exact. (Adding the whole -32 offset to one lane instead, as before,
                // made that lane ~1e8 for large same-signed activations; its conversion rounded
                // by several units, which the other lanes' cancellation left exposed.)
                const __m256i v = _mm256_sub_epi8(q6_k_levels(x[i], half, k), _mm256_set1_epi8(32));
                const __m256i s = _mm256_sign_epi8(load(y[i].qs + 128 * half + 32 * k), v);
                isum = _mm256_add_epi32(isum, dot_u8_i8_two_scales(_mm256_sign_epi8(v, v), s, sc[g], sc[g + 1]));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum(acc);
}

float vec_dot_iq4_xs_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockIq4Xs*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m128i table128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4nlValues.data()));
    const __m256i table = _mm256_set_m128i(table128, table128);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
        __m256i isum = _mm256_setzero_si256();
        for (int g = 0; g < 8; ++g) {
            const int ls = (((x[i].scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((x[i].scales_h >> (2 * g)) & 3) << 4)) - 32;
            const __m256i v = _mm256_shuffle_epi8(table, nibbles_32(x[i].qs + 16 * g));
            const __m256i q8 = load(y[i].qs + 32 * g);
            const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q8, v));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(static_cast<int16_t>(ls))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum(acc);
}

}  // namespace deskside::backends::cpu
