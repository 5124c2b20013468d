// Reference IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M: dequantize and dot against
// Q8_K, no quantizer (llama.cpp's needs an importance matrix and a codebook search; deskside
// reads these files, it does not write them). Every type goes through the group decoders of
// quant/iq_lowbit.h, whose header shows why these two templates give ggml's bits.
// ref: ggml/src/ggml-quants.c (dequantize_row_iq2_xxs ... dequantize_row_iq1_m),
//      ggml/src/ggml-cpu/quants.c (ggml_vec_dot_iq2_xxs_q8_K_generic ... ggml_vec_dot_iq1_m_q8_K_generic)
#include "quant/strict_fp.h"  // first: no fused multiply-adds

#include "quant/iq_lowbit.h"
#include "quant/reference.h"

namespace deskside::quant::ref {
namespace {

// element = (d * scale) * kIqDotScale * level: d * scale rounds once, the power of two is exact.
template <typename Block>
void to_float_iq(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const Block*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = iq_d(x[i]);
        for (int g = 0; g < kQKK / 32; ++g) {
            IqGroup grp;
            iq_group(x[i], g, &grp);
            for (int h = 0; h < 2; ++h) {
                const float dl = d * static_cast<float>(grp.scale[h]) * kIqDotScale<Block>;
                float* out = dst + i * kQKK + 32 * g;
                for (int j = 16 * h; j < 16 * h + 16; ++j) out[j] = dl * static_cast<float>(grp.level[j]);
            }
        }
    }
}

// Per super-block: the exact integer sum of scale x level x activation, scaled once by d_w * d_a;
// the type's power of two once at the end, as ggml.
template <typename Block>
float vec_dot_iq(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const Block*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int32_t isum = 0;
        for (int g = 0; g < kQKK / 32; ++g) {
            IqGroup grp;
            iq_group(x[i], g, &grp);
            const int8_t* q8 = y[i].qs + 32 * g;
            for (int h = 0; h < 2; ++h) {
                int32_t half = 0;
                for (int j = 16 * h; j < 16 * h + 16; ++j) half += grp.level[j] * q8[j];
                isum += grp.scale[h] * half;
            }
        }
        sum += iq_d(x[i]) * y[i].d * static_cast<float>(isum);
    }
    return kIqDotScale<Block> * sum;
}

}  // namespace

void to_float_iq2_xxs(const void* src, float* dst, int64_t n) { to_float_iq<BlockIq2Xxs>(src, dst, n); }
float vec_dot_iq2_xxs(int64_t n, const void* w, const void* a) { return vec_dot_iq<BlockIq2Xxs>(n, w, a); }
void to_float_iq2_xs(const void* src, float* dst, int64_t n) { to_float_iq<BlockIq2Xs>(src, dst, n); }
float vec_dot_iq2_xs(int64_t n, const void* w, const void* a) { return vec_dot_iq<BlockIq2Xs>(n, w, a); }
void to_float_iq2_s(const void* src, float* dst, int64_t n) { to_float_iq<BlockIq2S>(src, dst, n); }
float vec_dot_iq2_s(int64_t n, const void* w, const void* a) { return vec_dot_iq<BlockIq2S>(n, w, a); }
void to_float_iq3_xxs(const void* src, float* dst, int64_t n) { to_float_iq<BlockIq3Xxs>(src, dst, n); }
float vec_dot_iq3_xxs(int64_t n, const void* w, const void* a) { return vec_dot_iq<BlockIq3Xxs>(n, w, a); }
void to_float_iq3_s(const void* src, float* dst, int64_t n) { to_float_iq<BlockIq3S>(src, dst, n); }
float vec_dot_iq3_s(int64_t n, const void* w, const void* a) { return vec_dot_iq<BlockIq3S>(n, w, a); }
void to_float_iq1_s(const void* src, float* dst, int64_t n) { to_float_iq<BlockIq1S>(src, dst, n); }
float vec_dot_iq1_s(int64_t n, const void* w, const void* a) { return vec_dot_iq<BlockIq1S>(n, w, a); }
void to_float_iq1_m(const void* src, float* dst, int64_t n) { to_float_iq<BlockIq1M>(src, dst, n); }
float vec_dot_iq1_m(int64_t n, const void* w, const void* a) { return vec_dot_iq<BlockIq1M>(n, w, a); }

}  // namespace deskside::quant::ref
