// Reference IQ4_NL and IQ4_XS: 4-bit indices into a fixed non-uniform table of 16 levels
// (kIq4nlValues), with one fp16 scale per 32 elements (IQ4_NL) or 6-bit scales per 32 under an
// fp16 super-block scale (IQ4_XS). Their only quantizer is llama.cpp's weighted search, which lives
// with the other importance-weighted quantizers (quantize_weighted.cpp, reached through
// quantize_rows), so there is no from_float here.
// ref: ggml/src/ggml-quants.c (dequantize_row_iq4_nl, dequantize_row_iq4_xs),
//      ggml/src/ggml-cpu/quants.c (ggml_vec_dot_iq4_nl_q8_0_generic, ggml_vec_dot_iq4_xs_q8_K_generic)
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/reference.h"

namespace deskside::quant::ref {
namespace {

// Table value of element j of a 16-byte run of nibbles: low nibbles first, then high.
int iq4_value(const uint8_t* qs, int j) {
    return kIq4nlValues[j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4];
}

// IQ4_XS group scale (6 bits, biased by 32) of group g (0..7).
int iq4xs_scale(const BlockIq4Xs& b, int g) {
    const int low = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0xF;
    const int high = (b.scales_h >> (2 * g)) & 3;
    return (low | (high << 4)) - 32;
}

}  // namespace

void to_float_iq4_nl(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockIq4Nl*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(iq4_value(x[i].qs, j));
    }
}

float vec_dot_iq4_nl(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockIq4Nl*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK; ++j) sumi += y[i].qs[j] * iq4_value(x[i].qs, j);
        sum += (fp16_to_fp32(y[i].d) * fp16_to_fp32(x[i].d)) * static_cast<float>(sumi);
    }
    return sum;
}

void to_float_iq4_xs(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockIq4Xs*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int g = 0; g < kQKK / 32; ++g) {
            const float dl = d * static_cast<float>(iq4xs_scale(x[i], g));
            for (int j = 0; j < 32; ++j) {
                dst[i * kQKK + 32 * g + j] = dl * static_cast<float>(iq4_value(x[i].qs + 16 * g, j));
            }
        }
    }
}

float vec_dot_iq4_xs(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockIq4Xs*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int isum = 0;
        for (int g = 0; g < kQKK / 32; ++g) {
            int group = 0;
            for (int j = 0; j < 32; ++j) group += y[i].qs[32 * g + j] * iq4_value(x[i].qs + 16 * g, j);
            isum += iq4xs_scale(x[i], g) * group;
        }
        sum += (fp16_to_fp32(x[i].d) * y[i].d) * static_cast<float>(isum);
    }
    return sum;
}

}  // namespace deskside::quant::ref
