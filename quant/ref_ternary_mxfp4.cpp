// Reference TQ1_0 and TQ2_0 (ternary weights {-1, 0, 1} times one fp16 scale per 256 elements,
// as BitNet b1.58 models store them) and MXFP4 (OCP microscaling FP4: E2M1 values times one
// power-of-two E8M0 scale per 32 elements, the expert format of gpt-oss).
//
// The quantizers are the simple ones llama.cpp and gguf-py share: ternary scale = max |x|,
// t = round(x / scale) (half away from zero); MXFP4 scale exponent floor(log2(max |x|)) - 2
// (so the largest element lands at 4..8 times the unit, below the top level 6), each element
// then the nearest level, the first of equals in kMxfp4Values order. The dots sum level products
// as integers per block and scale once, as llama.cpp's generic CPU dots do.
// ref: ggml/src/ggml-quants.c (quantize_row_tq1_0_ref, quantize_row_tq2_0_ref,
//      quantize_row_mxfp4_ref, dequantize_row_*), ggml/src/ggml-cpu/quants.c
//      (ggml_vec_dot_tq1_0_q8_K_generic, ggml_vec_dot_tq2_0_q8_K_generic,
//      ggml_vec_dot_mxfp4_q8_0_generic), gguf-py 0.19.0 gguf/quants.py (TQ1_0, TQ2_0, MXFP4)
#include "quant/strict_fp.h"  // first: keep a*b+c unfused, as llama.cpp's reference build does

#include <cmath>

#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/reference.h"

namespace deskside::quant::ref {
namespace {

// ---- ternary ------------------------------------------------------------------------------

constexpr int kTq1Bytes5 = 32;  // qs bytes holding trits of 32-element runs (elements 0..159)
constexpr int kTq1Bytes5b = sizeof(BlockTq1_0::qs) - kTq1Bytes5;  // 16: elements 160..239
constexpr int kTq1Qh = sizeof(BlockTq1_0::qh);                     // 4: elements 240..255

// Trit n (0..4) of a TQ1_0 byte: the byte is ceil(v * 256 / 243) for the base-3 number v, so
// multiplying by 3^n (mod 256) shifts trit n to the top, where * 3 >> 8 reads it.
int trit(uint8_t byte, int n) {
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    const auto shifted = static_cast<uint8_t>(byte * kPow3[n]);
    return (shifted * 3) >> 8;
}

// The 256 ternary levels (-1, 0, 1) of a TQ1_0 block, in element order (see quant/blocks.h).
void tq1_0_levels(const BlockTq1_0& b, int8_t* out) {
    for (int n = 0; n < 5; ++n) {
        for (int m = 0; m < kTq1Bytes5; ++m) out[32 * n + m] = static_cast<int8_t>(trit(b.qs[m], n) - 1);
        for (int m = 0; m < kTq1Bytes5b; ++m)
            out[160 + 16 * n + m] = static_cast<int8_t>(trit(b.qs[kTq1Bytes5 + m], n) - 1);
    }
    for (int n = 0; n < 4; ++n) {
        for (int m = 0; m < kTq1Qh; ++m) out[240 + 4 * n + m] = static_cast<int8_t>(trit(b.qh[m], n) - 1);
    }
}

// Levels of a TQ2_0 block, in element order.
void tq2_0_levels(const BlockTq2_0& b, int8_t* out) {
    for (int e = 0; e < kQKK; ++e) {
        const int half = e / 128, shift = 2 * ((e % 128) / 32);
        out[e] = static_cast<int8_t>(((b.qs[32 * half + e % 32] >> shift) & 3) - 1);
    }
}

// The stored ternary digits (t + 1: 0, 1, 2) of one 256-element block of x, and its scale.
float ternary_digits(const float* x, uint8_t* t) {
    float amax = 0;
    for (int e = 0; e < kQKK; ++e) amax = std::fmax(amax, std::fabs(x[e]));
    const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
    for (int e = 0; e < kQKK; ++e) t[e] = static_cast<uint8_t>(std::lround(x[e] * id) + 1);
    return amax;
}

// `count` trits t[0], t[stride], ... as one TQ1_0 byte, t[0] the most significant of five.
uint8_t pack_trits(const uint8_t* t, int count, int stride) {
    int v = 0;
    for (int n = 0; n < 5; ++n) v = 3 * v + (n < count ? t[n * stride] : 0);
    return static_cast<uint8_t>((v * 256 + 242) / 243);
}

// ---- MXFP4 --------------------------------------------------------------------------------

int mxfp4_level(const uint8_t* qs, int j) { return kMxfp4Values[j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4]; }

// Index into kMxfp4Values of the level nearest to x at unit d; the first on ties.
uint8_t nearest_mxfp4(float x, float d) {
    int best = 0;
    float best_err = std::fabs(d * static_cast<float>(kMxfp4Values[0]) - x);
    for (int i = 1; i < 16; ++i) {
        const float err = std::fabs(d * static_cast<float>(kMxfp4Values[i]) - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return static_cast<uint8_t>(best);
}

}  // namespace

// ---- TQ1_0 --------------------------------------------------------------------------------

void from_float_tq1_0(const float* src, void* dst, int64_t n) {
    auto* blocks = static_cast<BlockTq1_0*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t t[kQKK];
        blocks[i].d = fp32_to_fp16(ternary_digits(src + i * kQKK, t));
        for (int m = 0; m < kTq1Bytes5; ++m) blocks[i].qs[m] = pack_trits(t + m, 5, 32);
        for (int m = 0; m < kTq1Bytes5b; ++m) blocks[i].qs[kTq1Bytes5 + m] = pack_trits(t + 160 + m, 5, 16);
        for (int m = 0; m < kTq1Qh; ++m) blocks[i].qh[m] = pack_trits(t + 240 + m, 4, 4);
    }
}

void to_float_tq1_0(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockTq1_0*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        int8_t v[kQKK];
        tq1_0_levels(x[i], v);
        for (int e = 0; e < kQKK; ++e) dst[i * kQKK + e] = d * static_cast<float>(v[e]);
    }
}

float vec_dot_tq1_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockTq1_0*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int8_t v[kQKK];
        tq1_0_levels(x[i], v);
        int isum = 0;
        for (int e = 0; e < kQKK; ++e) isum += v[e] * y[i].qs[e];
        sum += static_cast<float>(isum) * (fp16_to_fp32(x[i].d) * y[i].d);
    }
    return sum;
}

// ---- TQ2_0 --------------------------------------------------------------------------------

void from_float_tq2_0(const float* src, void* dst, int64_t n) {
    auto* blocks = static_cast<BlockTq2_0*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        uint8_t t[kQKK];
        blocks[i].d = fp32_to_fp16(ternary_digits(src + i * kQKK, t));
        for (int half = 0; half < 2; ++half) {
            const uint8_t* h = t + 128 * half;
            for (int m = 0; m < 32; ++m) {
                blocks[i].qs[32 * half + m] =
                    static_cast<uint8_t>(h[m] | (h[m + 32] << 2) | (h[m + 64] << 4) | (h[m + 96] << 6));
            }
        }
    }
}

void to_float_tq2_0(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockTq2_0*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        int8_t v[kQKK];
        tq2_0_levels(x[i], v);
        for (int e = 0; e < kQKK; ++e) dst[i * kQKK + e] = d * static_cast<float>(v[e]);
    }
}

float vec_dot_tq2_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockTq2_0*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int8_t v[kQKK];
        tq2_0_levels(x[i], v);
        int isum = 0;
        for (int e = 0; e < kQKK; ++e) isum += v[e] * y[i].qs[e];
        sum += static_cast<float>(isum) * (y[i].d * fp16_to_fp32(x[i].d));
    }
    return sum;
}

// ---- MXFP4 --------------------------------------------------------------------------------

void from_float_mxfp4(const float* src, void* dst, int64_t n) {
    auto* blocks = static_cast<BlockMxfp4*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        float amax = 0;
        for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        // The unit d (half the E8M0 scale) puts amax in [4d, 8d): 2^(floor(log2 amax) - 2).
        // Through int, as x86 converts: below 2^-125 the exponent wraps modulo 256 as in ggml.
        const auto e = static_cast<uint8_t>(amax > 0.0f ? static_cast<int>(std::floor(std::log2(amax)) - 2 + 127) : 0);
        const float d = e8m0_to_fp32_half(e);
        blocks[i].e = e;
        for (int j = 0; j < kQK / 2; ++j)
            blocks[i].qs[j] = static_cast<uint8_t>(nearest_mxfp4(x[j], d) | (nearest_mxfp4(x[j + 16], d) << 4));
    }
}

void to_float_mxfp4(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockMxfp4*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = e8m0_to_fp32_half(x[i].e);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(mxfp4_level(x[i].qs, j));
    }
}

float vec_dot_mxfp4(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockMxfp4*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK; ++j) sumi += y[i].qs[j] * mxfp4_level(x[i].qs, j);
        sum += (fp16_to_fp32(y[i].d) * e8m0_to_fp32_half(x[i].e)) * static_cast<float>(sumi);
    }
    return sum;
}

}  // namespace deskside::quant::ref
