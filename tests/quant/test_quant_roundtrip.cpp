// Per-type behaviour of the scalar references on synthetic data: block sizes, the traits table,
// quantize -> dequantize error, and vec_dot against float dots.
//
// Two kinds of data: llama.cpp's test-quantize-fns signal (0.1 + 2 cos(i + offset)) judged by
// that test's own metrics and thresholds, and Gaussian noise (what real weight matrices look
// like) judged by relative RMSE bounds derived below.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace q = deskside::quant;
using q::TypeId;

namespace {

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

std::vector<uint8_t> quantize(TypeId type, const std::vector<float>& x) {
    std::vector<uint8_t> out(q::row_bytes(type, static_cast<int64_t>(x.size())));
    q::quant_traits(type)->from_float(x.data(), out.data(), static_cast<int64_t>(x.size()));
    return out;
}

std::vector<float> dequantize(TypeId type, const std::vector<uint8_t>& data, size_t n) {
    std::vector<float> out(n);
    q::quant_traits(type)->to_float(data.data(), out.data(), static_cast<int64_t>(n));
    return out;
}

double relative_rmse(const std::vector<float>& ref, const std::vector<float>& got) {
    double err = 0, sig = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        err += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
        sig += double(ref[i]) * ref[i];
    }
    return std::sqrt(err / sig);
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
    return s;
}

// Relative RMSE bounds on N(0,1) data. A uniform quantizer with step D has error RMS D/sqrt(12);
// for blocks of 32 Gaussian values the absmax is about 2.5 sigma, so e.g. Q4_0 (D = 2.5/8)
// expects ~0.09 and Q8_0 (D = 2.5/127) ~0.0057. K-quants refine their scales and do better
// than the plain formula. Each bound is the expected value with 25-40% headroom.
struct TypeBound {
    TypeId type;
    double rel_rmse;
};
constexpr TypeBound kGaussianBounds[] = {
    {TypeId::F16, 4e-4},  {TypeId::BF16, 3e-3}, {TypeId::Q8_0, 0.008}, {TypeId::Q8_1, 0.008},
    {TypeId::Q8_K, 0.008}, {TypeId::Q6_K, 0.025}, {TypeId::Q5_0, 0.06}, {TypeId::Q5_1, 0.055},
    {TypeId::Q5_K, 0.05},  {TypeId::Q4_0, 0.12},  {TypeId::Q4_1, 0.11}, {TypeId::Q4_K, 0.10},
    {TypeId::Q3_K, 0.20},  {TypeId::Q2_K, 0.38},
};

double gaussian_bound(TypeId type) {
    for (const TypeBound& b : kGaussianBounds) {
        if (b.type == type) return b.rel_rmse;
    }
    return type == TypeId::F32 ? 1e-7 : 0.12;  // IQ4 types: as 4-bit Q4_0 (not quantized here)
}

constexpr TypeId kWeightTypes[] = {TypeId::F32,  TypeId::F16,  TypeId::BF16, TypeId::Q4_0, TypeId::Q4_1,
                                   TypeId::Q5_0, TypeId::Q5_1, TypeId::Q8_0, TypeId::Q2_K, TypeId::Q3_K,
                                   TypeId::Q4_K, TypeId::Q5_K, TypeId::Q6_K, TypeId::IQ4_NL, TypeId::IQ4_XS};

}  // namespace

TEST_CASE("block structs match the GGUF type table", "[quant]") {
    CHECK(q::type_info(TypeId::Q4_0).block_bytes == sizeof(q::BlockQ4_0));
    CHECK(q::type_info(TypeId::Q4_1).block_bytes == sizeof(q::BlockQ4_1));
    CHECK(q::type_info(TypeId::Q5_0).block_bytes == sizeof(q::BlockQ5_0));
    CHECK(q::type_info(TypeId::Q5_1).block_bytes == sizeof(q::BlockQ5_1));
    CHECK(q::type_info(TypeId::Q8_0).block_bytes == sizeof(q::BlockQ8_0));
    CHECK(q::type_info(TypeId::Q8_1).block_bytes == sizeof(q::BlockQ8_1));
    CHECK(q::type_info(TypeId::Q2_K).block_bytes == sizeof(q::BlockQ2_K));
    CHECK(q::type_info(TypeId::Q3_K).block_bytes == sizeof(q::BlockQ3_K));
    CHECK(q::type_info(TypeId::Q4_K).block_bytes == sizeof(q::BlockQ4_K));
    CHECK(q::type_info(TypeId::Q5_K).block_bytes == sizeof(q::BlockQ5_K));
    CHECK(q::type_info(TypeId::Q6_K).block_bytes == sizeof(q::BlockQ6_K));
    CHECK(q::type_info(TypeId::Q8_K).block_bytes == sizeof(q::BlockQ8_K));
    CHECK(q::type_info(TypeId::IQ4_NL).block_bytes == sizeof(q::BlockIq4Nl));
    CHECK(q::type_info(TypeId::IQ4_XS).block_bytes == sizeof(q::BlockIq4Xs));
    CHECK(q::type_info(TypeId::IQ2_XXS).block_bytes == sizeof(q::BlockIq2Xxs));
    CHECK(q::type_info(TypeId::IQ2_XS).block_bytes == sizeof(q::BlockIq2Xs));
    CHECK(q::type_info(TypeId::IQ2_S).block_bytes == sizeof(q::BlockIq2S));
    CHECK(q::type_info(TypeId::IQ3_XXS).block_bytes == sizeof(q::BlockIq3Xxs));
    CHECK(q::type_info(TypeId::IQ3_S).block_bytes == sizeof(q::BlockIq3S));
    CHECK(q::type_info(TypeId::IQ1_S).block_bytes == sizeof(q::BlockIq1S));
    CHECK(q::type_info(TypeId::IQ1_M).block_bytes == sizeof(q::BlockIq1M));
}

TEST_CASE("traits: activation types follow llama.cpp's CPU backend", "[quant]") {
    // ref: ggml/src/ggml-cpu/ggml-cpu.c type_traits_cpu[].vec_dot_type
    const std::pair<TypeId, TypeId> expected[] = {
        {TypeId::F32, TypeId::F32},     {TypeId::F16, TypeId::F16},     {TypeId::BF16, TypeId::BF16},
        {TypeId::Q4_0, TypeId::Q8_0},   {TypeId::Q5_0, TypeId::Q8_0},   {TypeId::Q8_0, TypeId::Q8_0},
        {TypeId::IQ4_NL, TypeId::Q8_0}, {TypeId::Q4_1, TypeId::Q8_1},   {TypeId::Q5_1, TypeId::Q8_1},
        {TypeId::Q2_K, TypeId::Q8_K},   {TypeId::Q3_K, TypeId::Q8_K},   {TypeId::Q4_K, TypeId::Q8_K},
        {TypeId::Q5_K, TypeId::Q8_K},   {TypeId::Q6_K, TypeId::Q8_K},   {TypeId::IQ4_XS, TypeId::Q8_K},
        {TypeId::TQ1_0, TypeId::Q8_K},  {TypeId::TQ2_0, TypeId::Q8_K},  {TypeId::MXFP4, TypeId::Q8_0},
        {TypeId::IQ2_XXS, TypeId::Q8_K}, {TypeId::IQ2_XS, TypeId::Q8_K}, {TypeId::IQ2_S, TypeId::Q8_K},
        {TypeId::IQ3_XXS, TypeId::Q8_K}, {TypeId::IQ3_S, TypeId::Q8_K},  {TypeId::IQ1_S, TypeId::Q8_K},
        {TypeId::IQ1_M, TypeId::Q8_K},
    };
    for (const auto& [w, a] : expected) {
        const q::QuantTraits* t = q::quant_traits(w);
        REQUIRE(t != nullptr);
        INFO(q::type_info(w).name);
        CHECK(t->type == w);
        CHECK(t->vec_dot_type == a);
        CHECK(t->to_float != nullptr);
        CHECK(t->vec_dot != nullptr);
        // The i-quants are read, never written (their quantizers need an importance matrix).
        const bool iq = w == TypeId::IQ4_NL || w == TypeId::IQ4_XS || w == TypeId::IQ2_XXS || w == TypeId::IQ2_XS ||
                        w == TypeId::IQ2_S || w == TypeId::IQ3_XXS || w == TypeId::IQ3_S || w == TypeId::IQ1_S ||
                        w == TypeId::IQ1_M;
        CHECK((t->from_float == nullptr) == iq);
        REQUIRE(q::quant_traits(a) != nullptr);
        CHECK(q::quant_traits(a)->from_float != nullptr);
        // One activation block covers a whole number of weight blocks.
        CHECK(q::type_info(a).block_size % q::type_info(w).block_size == 0);
    }
    CHECK(q::quant_traits(TypeId::I32) == nullptr);
    CHECK(q::quant_traits(TypeId::F64) == nullptr);
}

TEST_CASE("test-quantize-fns signal within llama.cpp's own thresholds", "[quant]") {
    // ref: llama.cpp tests/test-quantize-fns.cpp: data, metrics and limits as defined there.
    constexpr size_t kN = 32 * 128;
    std::vector<float> data1(kN), data2(kN);
    for (size_t i = 0; i < kN; ++i) {
        data1[i] = 0.1f + 2 * std::cos(static_cast<float>(i) + 0.0f);
        data2[i] = 0.1f + 2 * std::cos(static_cast<float>(i) + 1.0f);
    }
    for (TypeId type : kWeightTypes) {
        const q::QuantTraits* t = q::quant_traits(type);
        if (t->from_float == nullptr) continue;
        INFO(q::type_info(type).name);
        const auto packed = quantize(type, data1);
        const auto back = dequantize(type, packed, kN);
        double sum = 0;
        for (size_t i = 0; i < kN; ++i) sum += (double(data1[i]) - back[i]) * (double(data1[i]) - back[i]);
        const double total_error = std::sqrt(sum) / kN;
        const double max_total = type == TypeId::Q2_K ? 0.0075 : type == TypeId::Q3_K ? 0.0040 : 0.002;
        CHECK(total_error < max_total);

        const auto act = quantize(t->vec_dot_type, data2);
        const double dot_error = std::fabs(t->vec_dot(kN, packed.data(), act.data()) - dot(data1, data2)) / kN;
        CHECK(dot_error < (type == TypeId::Q2_K ? 0.04 : 0.02));
    }
}

TEST_CASE("quantize -> dequantize error on Gaussian weights", "[quant]") {
    const auto x = gaussian(256 * 64, 7);
    for (const TypeBound& b : kGaussianBounds) {
        INFO(q::type_info(b.type).name);
        const double err = relative_rmse(x, dequantize(b.type, quantize(b.type, x), x.size()));
        CHECK(err < b.rel_rmse);
        CHECK(err > 0);  // a lossy format that reproduced noise exactly would mean a broken test
    }
    // Scale invariance: block formats carry their own scale, so tiny and large tensors behave
    // alike (as long as the fp16 scales stay normal).
    for (float sigma : {1e-3f, 30.0f}) {
        const auto xs = gaussian(256 * 16, 8, sigma);
        for (TypeId type : {TypeId::Q4_0, TypeId::Q8_0, TypeId::Q4_K, TypeId::Q6_K}) {
            INFO(q::type_info(type).name << " sigma " << sigma);
            CHECK(relative_rmse(xs, dequantize(type, quantize(type, xs), xs.size())) < 0.12);
        }
    }
}

TEST_CASE("all-zero and constant blocks quantize without NaN", "[quant]") {
    for (TypeId type : kWeightTypes) {
        const q::QuantTraits* t = q::quant_traits(type);
        if (t->from_float == nullptr) continue;
        INFO(q::type_info(type).name);
        const std::vector<float> zeros(512, 0.0f);
        for (float v : dequantize(type, quantize(type, zeros), zeros.size())) REQUIRE(v == 0.0f);
        const std::vector<float> ones(512, 0.75f);
        for (float v : dequantize(type, quantize(type, ones), ones.size())) REQUIRE(std::fabs(v - 0.75f) < 0.75f * 0.1f);
    }
}

TEST_CASE("vec_dot equals the float dot of the dequantized operands", "[quant]") {
    // vec_dot works on the quantized integers; mathematically it is the dot of the two
    // dequantized vectors, so the only difference allowed is float rounding: 1e-5 relative to
    // sum |w_i a_i| (a few ulps per block accumulated over 16 to 128 blocks).
    constexpr size_t kN = 4096;
    const auto w = gaussian(kN, 11);
    const auto a = gaussian(kN, 12, 0.5f);
    for (TypeId type : kWeightTypes) {
        const q::QuantTraits* t = q::quant_traits(type);
        INFO(q::type_info(type).name);
        std::vector<uint8_t> wq;
        if (t->from_float != nullptr) {
            wq = quantize(type, w);
        } else {  // IQ4: random bytes are valid blocks once the scales are sane
            std::mt19937 rng(13);
            wq.resize(q::row_bytes(type, kN));
            for (auto& byte : wq) byte = static_cast<uint8_t>(rng());
            const size_t bb = q::type_info(type).block_bytes;
            for (size_t off = 0; off < wq.size(); off += bb) {
                const uint16_t d = 0x2000;  // fp16 ~0.0078
                std::memcpy(wq.data() + off, &d, 2);
            }
        }
        const auto aq = quantize(t->vec_dot_type, a);
        const auto wd = dequantize(type, wq, kN);
        const auto ad = dequantize(t->vec_dot_type, aq, kN);
        double abs_sum = 0;
        for (size_t i = 0; i < kN; ++i) abs_sum += std::fabs(double(wd[i]) * ad[i]);
        // Q8_1 stores s = d * sum(q) as fp16, so the offset term m * s of Q4_1/Q5_1 carries that
        // rounding (2^-11 relative) on top; llama.cpp's dot has the same property.
        double offset_rounding = 0;
        if (t->vec_dot_type == TypeId::Q8_1) {
            const auto* act = reinterpret_cast<const q::BlockQ8_1*>(aq.data());
            const size_t wb = q::type_info(type).block_bytes;
            for (size_t b = 0; b < kN / q::kQK; ++b) {
                uint16_t m;  // offset 2 in both Q4_1 and Q5_1 blocks
                std::memcpy(&m, wq.data() + b * wb + 2, 2);
                offset_rounding += std::fabs(q::fp16_to_fp32(m) * q::fp16_to_fp32(act[b].s)) * std::ldexp(1.0, -11);
            }
        }
        const double got = t->vec_dot(kN, wq.data(), aq.data());
        CHECK(std::fabs(got - dot(wd, ad)) <= 1e-5 * abs_sum + offset_rounding);

        // And against the unquantized dot: for independent errors the error of a dot of n random
        // terms is about |w||a|/sqrt(n) * sqrt(e_w^2 + e_a^2) (e = relative RMSE); allow 4x that,
        // with each operand's Gaussian bound.
        if (t->from_float != nullptr) {
            const double norm = std::sqrt(dot(w, w) * dot(a, a));
            const double e = std::hypot(gaussian_bound(type), gaussian_bound(t->vec_dot_type));
            CHECK(std::fabs(got - dot(w, a)) <= 4 * e * norm / std::sqrt(double(kN)));
        }
    }
}
