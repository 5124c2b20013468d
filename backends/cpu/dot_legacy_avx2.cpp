// AVX2 dots for the 32-element block formats: Q4_0, Q5_0, Q8_0 and IQ4_NL against Q8_0, Q4_1
// and Q5_1 against Q8_1. One block is one 256-bit vector of 32 int8 levels; its integer dot
// with the activation block is exact, and the block's scale product is applied with one FMA
// into 8 running float sums.
// ref: quant/ref_legacy.cpp and quant/ref_iq4.cpp (the scalar references these must match)
#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/dot_isa.h"
#include "backends/cpu/dot_levels_avx2.h"
#include "quant/blocks.h"

namespace deskside::backends::cpu {

using namespace avx2;
using quant::kQK;

namespace {

// Sum over blocks of d_w * d_a * (integer dot of the block), where `levels(i)` gives block i's
// weight levels as signed bytes in [-127, 127].
template <typename WBlock, typename LevelsFn>
float dot_signed_blocks(int64_t n, const WBlock* x, const quant::BlockQ8_0* y, LevelsFn levels) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQK; ++i) {
        const __m256i sums = dot_i8_i8(levels(i), load(y[i].qs));
        const __m256 d = _mm256_set1_ps(fp16(x[i].d) * fp16(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc);
    }
    return hsum(acc);
}

// As dot_signed_blocks for unsigned levels with an offset m: sum of d_w * d_a * dot + m * s_a.
template <typename WBlock, typename LevelsFn>
float dot_offset_blocks(int64_t n, const WBlock* x, const quant::BlockQ8_1* y, LevelsFn levels) {
    __m256 acc = _mm256_setzero_ps();
    float offsets = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const __m256i sums = dot_u8_i8(levels(i), load(y[i].qs));
        const __m256 d = _mm256_set1_ps(fp16(x[i].d) * fp16(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc);
        offsets += fp16(x[i].m) * fp16(y[i].s);
    }
    return hsum(acc) + offsets;
}

}  // namespace

float vec_dot_q4_0_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ4_0*>(w);
    return dot_signed_blocks(n, x, static_cast<const quant::BlockQ8_0*>(a), [&](int64_t i) { return levels(x[i]); });
}

float vec_dot_q5_0_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ5_0*>(w);
    return dot_signed_blocks(n, x, static_cast<const quant::BlockQ8_0*>(a), [&](int64_t i) { return levels(x[i]); });
}

float vec_dot_q8_0_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ8_0*>(w);
    return dot_signed_blocks(n, x, static_cast<const quant::BlockQ8_0*>(a), [&](int64_t i) { return levels(x[i]); });
}

float vec_dot_iq4_nl_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockIq4Nl*>(w);
    return dot_signed_blocks(n, x, static_cast<const quant::BlockQ8_0*>(a), [&](int64_t i) { return levels(x[i]); });
}

float vec_dot_q4_1_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ4_1*>(w);
    return dot_offset_blocks(n, x, static_cast<const quant::BlockQ8_1*>(a), [&](int64_t i) { return nibbles_32(x[i].qs); });
}

float vec_dot_q5_1_avx2(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const quant::BlockQ5_1*>(w);
    return dot_offset_blocks(n, x, static_cast<const quant::BlockQ8_1*>(a), [&](int64_t i) {
        uint32_t qh;
        __builtin_memcpy(&qh, x[i].qh, 4);
        return _mm256_or_si256(nibbles_32(x[i].qs), _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
    });
}

}  // namespace deskside::backends::cpu
