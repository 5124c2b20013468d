// The CUDA kernels' __host__ __device__ block code (backends/cuda/device/*.cuh), compiled here by
// the host compiler as plain C++ and checked against quant/, which we did not write for the GPU:
// - every helper that must be bit-exact is: half / bfloat16 conversions (all 65536 inputs one
//   way, a 1/97 stride of all floats the other), the packed-scale accessors, the IQ4 codebook,
//   dp4a's fallback;
// - dequantize() of random blocks writes quant::to_float's bits, for every weight type;
// - quantize_activation() writes quant::activation_from_float's bytes (Q8_0, Q8_1, Q8_K, F16,
//   BF16), on Gaussians, zero blocks and rounding ties;
// - (the matmul's per-output arithmetic, device/exact_dot.cuh, is held to the CPU backend's bits
//   in test_cuda_exact_matmul.cpp);
// - (attention, rms_norm, rope, silu, gelu, swiglu_oai, the router and expf_libm are held to the
//   CPU backend's bits in test_cuda_exact_ops.cpp).
#include "quant/strict_fp.h"  // first: the device code's float steps must stay unfused here too

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/device/block_dot.cuh"
#include "kernel_test_data.h"
#include "quant/activation_quant.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace dev = deskside::backends::cuda::device;
namespace q = deskside::quant;
using q::TypeId;
using namespace deskside::test;

namespace {

constexpr TypeId kWeightTypes[] = {TypeId::F32,  TypeId::F16,  TypeId::BF16, TypeId::Q4_0,   TypeId::Q4_1,
                                   TypeId::Q5_0, TypeId::Q5_1, TypeId::Q8_0, TypeId::IQ4_NL, TypeId::Q2_K,
                                   TypeId::Q3_K, TypeId::Q4_K, TypeId::Q5_K, TypeId::Q6_K,   TypeId::IQ4_XS};
constexpr TypeId kLowbitTypes[] = {TypeId::IQ2_XXS, TypeId::IQ2_XS, TypeId::IQ2_S, TypeId::IQ3_XXS, TypeId::IQ3_S,
                                   TypeId::IQ1_S,   TypeId::IQ1_M,  TypeId::TQ1_0, TypeId::TQ2_0,   TypeId::MXFP4};

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// A sane random block scale: finite, either sign, small enough that dots stay far from overflow.
uint16_t random_scale(std::mt19937& rng) {
    std::uniform_real_distribution<float> mag(0.001f, 0.05f);
    return q::fp32_to_fp16((rng() & 1 ? -1.0f : 1.0f) * mag(rng));
}

// Random bytes with every fp16 scale field replaced by a sane value.
void sanitize(q::BlockQ4_0& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockQ4_1& b, std::mt19937& rng) { b.d = random_scale(rng), b.m = random_scale(rng); }
void sanitize(q::BlockQ5_0& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockQ5_1& b, std::mt19937& rng) { b.d = random_scale(rng), b.m = random_scale(rng); }
void sanitize(q::BlockQ8_0& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq4Nl& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockQ2_K& b, std::mt19937& rng) { b.d = random_scale(rng), b.dmin = random_scale(rng); }
void sanitize(q::BlockQ3_K& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockQ4_K& b, std::mt19937& rng) { b.d = random_scale(rng), b.dmin = random_scale(rng); }
void sanitize(q::BlockQ5_K& b, std::mt19937& rng) { b.d = random_scale(rng), b.dmin = random_scale(rng); }
void sanitize(q::BlockQ6_K& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq4Xs& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq2Xxs& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq2Xs& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq2S& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq3Xxs& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq3S& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq1S& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq1M& b, std::mt19937& rng) {  // d in the top nibbles of the four scale words
    const uint16_t d = random_scale(rng);
    for (int i = 0; i < 4; ++i)
        b.scales[2 * i + 1] = static_cast<uint8_t>((b.scales[2 * i + 1] & 0x0F) | ((d >> (4 * i)) & 0xF) << 4);
}
void sanitize(q::BlockTq1_0& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockTq2_0& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockMxfp4& b, std::mt19937& rng) { b.e = static_cast<uint8_t>(rng()); }  // every exponent

// k elements of weights of `type`: random blocks (random_bytes) or quantized Gaussians.
template <class Traits>
std::vector<uint8_t> weight_row(TypeId type, int64_t k, bool random_bytes, std::mt19937& rng) {
    std::vector<uint8_t> row(q::row_bytes(type, k));
    const auto v = gaussian(static_cast<size_t>(k), rng, 1.0f);
    if constexpr (Traits::kFloat) {
        q::quant_traits(type)->from_float(v.data(), row.data(), k);
    } else {
        if (!random_bytes && q::quant_traits(type)->from_float != nullptr) {
            q::quant_traits(type)->from_float(v.data(), row.data(), k);
        } else {
            for (auto& b : row) b = static_cast<uint8_t>(rng());
            auto* blocks = reinterpret_cast<typename Traits::Block*>(row.data());
            for (int64_t i = 0; i < k / Traits::kElems; ++i) sanitize(blocks[i], rng);
        }
    }
    return row;
}

// quant::activation_from_float next to the device quantizer, for the activation type of Traits.
template <class Traits>
std::vector<uint8_t> device_quantize(const float* x, int64_t k) {
    std::vector<uint8_t> out(q::row_bytes(Traits::kActType, k));
    if constexpr (Traits::kFloat) {
        auto* h = reinterpret_cast<uint16_t*>(out.data());
        for (int64_t i = 0; i < k; ++i) {
            if constexpr (Traits::kActType == TypeId::F32) std::memcpy(out.data() + 4 * i, &x[i], 4);
            else if constexpr (Traits::kActType == TypeId::F16) h[i] = dev::quantize_activation_f16(x[i]);
            else h[i] = dev::quantize_activation_bf16(x[i]);
        }
    } else {
        using A = typename Traits::ActBlock;
        constexpr int kActElems = Traits::kActType == TypeId::Q8_K ? q::kQKK : q::kQK;
        auto* blocks = reinterpret_cast<A*>(out.data());
        for (int64_t i = 0; i < k / kActElems; ++i) dev::quantize_activation(x + i * kActElems, blocks[i]);
    }
    return out;
}

}  // namespace

TEST_CASE("CUDA device code: half and bfloat16 conversions are quant/float16.h's", "[cuda-device-code]") {
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto u = static_cast<uint16_t>(h);
        REQUIRE(bits(dev::fp16_to_fp32(u)) == bits(q::fp16_to_fp32(u)));
        REQUIRE(bits(dev::bf16_to_fp32(u)) == bits(q::bf16_to_fp32(u)));
    }
    for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 97) {
        float f;
        const auto u = static_cast<uint32_t>(x);
        std::memcpy(&f, &u, 4);
        REQUIRE(dev::fp32_to_fp16(f) == q::fp32_to_fp16(f));
        REQUIRE(dev::fp32_to_bf16(f) == q::fp32_to_bf16(f));
    }
}

TEST_CASE("CUDA device code: block fields, codebook and dp4a", "[cuda-device-code]") {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 2000; ++trial) {
        uint8_t packed[12];
        for (auto& b : packed) b = static_cast<uint8_t>(rng());
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            int dsc, dm;
            q::k4_scale_min(j, packed, &sc, &m);
            dev::k4_scale_min(j, packed, &dsc, &dm);
            REQUIRE(dsc == sc);
            REQUIRE(dm == m);
        }
        for (int j = 0; j < 16; ++j) REQUIRE(dev::q3k_scale(j, packed) == q::q3k_scale(j, packed));
        const uint32_t a = rng(), b = rng();
        int expect = 5;
        for (int i = 0; i < 4; ++i) expect += int8_t(a >> (8 * i)) * int8_t(b >> (8 * i));
        REQUIRE(dev::dp4a(a, b, 5) == expect);
    }
    for (int i = 0; i < 16; ++i) REQUIRE(dev::iq4_level(i) == q::kIq4nlValues[i]);
}

// dev::dequantize of `type`'s blocks (quantized rows and random bytes) gives quant::to_float's bits;
// false where the device code does not take the type.
bool dequantizes_as_quant(TypeId type, int64_t k, std::mt19937& rng) {
    return dev::visit_weight_type(type, [&](auto traits) {
        using T = decltype(traits);
        if constexpr (!T::kFloat) {
                for (bool random_bytes : {false, true}) {
                    INFO(q::type_info(type).name << (random_bytes ? " random bytes" : " quantized"));
                    const auto row = weight_row<T>(type, k, random_bytes, rng);
                    std::vector<float> expect(k), got(k);
                    q::quant_traits(type)->to_float(row.data(), expect.data(), k);
                    const auto* blocks = reinterpret_cast<const typename T::Block*>(row.data());
                    for (int64_t i = 0; i < k / T::kElems; ++i) dev::dequantize(blocks[i], got.data() + i * T::kElems);
                    REQUIRE(std::memcmp(expect.data(), got.data(), k * sizeof(float)) == 0);
                }
        }
    });
}

TEST_CASE("CUDA device code: dequantize writes quant::to_float's bits", "[cuda-device-code]") {
    std::mt19937 rng(3);
    for (TypeId type : kWeightTypes) CHECK(dequantizes_as_quant(type, 1024, rng));
}

TEST_CASE("CUDA device code: the low-bit codebooks are quant/'s and their blocks dequantize to quant::to_float's bits",
          "[cuda-device-code]") {
    const auto same = [](const auto& device, const auto& table) {
        return sizeof(device) == table.size() * sizeof(table[0]) &&
               std::memcmp(device, table.data(), sizeof(device)) == 0;
    };
    for (const dev::LowbitCodebooks* c : {&dev::kLowbitCodebooksHost, &dev::kLowbitCodebooksDevice}) {
        CHECK(same(c->iq2xxs, q::kIq2xxsGrid));
        CHECK(same(c->iq2xs, q::kIq2xsGrid));
        CHECK(same(c->iq2s, q::kIq2sGrid));
        CHECK(same(c->iq1s, q::kIq1sGrid));
        CHECK(same(c->iq3xxs, q::kIq3xxsGrid));
        CHECK(same(c->iq3s, q::kIq3sGrid));
        CHECK(same(c->signs, q::kIqSigns));
        CHECK(same(c->mxfp4, q::kMxfp4Values));
    }
    for (uint32_t e = 0; e < 256; ++e) REQUIRE(bits(dev::e8m0_to_fp32_half(e)) == bits(q::e8m0_to_fp32_half(e)));

    std::mt19937 rng(7);
    for (TypeId type : kLowbitTypes) REQUIRE(dequantizes_as_quant(type, 2048, rng));
}

TEST_CASE("CUDA device code: activation quantization writes quant::activation_from_float's bytes",
          "[cuda-device-code]") {
    std::mt19937 rng(5);
    constexpr int64_t k = 1024;
    for (TypeId type : kWeightTypes) {
        dev::visit_weight_type(type, [&](auto traits) {
            using T = decltype(traits);
            INFO(q::type_info(type).name);
            std::vector<std::vector<float>> rows;
            for (float sigma : {1.0f, 1e-3f, 30.0f}) rows.push_back(gaussian(k, rng, sigma));
            // Zero blocks, a negative extreme, and levels that land exactly on .5 (amax = 127 / 2
            // makes x * 127 / amax = 2x, so x = 0.25 gives 0.5).
            std::vector<float> special(k, 0.0f);
            for (int64_t i = 256; i < 512; ++i) special[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
            special[300] = -63.5f;
            special[600] = 63.5f;
            for (int64_t i = 601; i < 640; ++i) special[i] = 0.25f * static_cast<float>(i % 5);
            rows.push_back(special);
            for (const auto& x : rows) {
                const auto got = device_quantize<T>(x.data(), k);
                std::vector<uint8_t> expect(got.size());
                if (T::kActType == TypeId::F32) std::memcpy(expect.data(), x.data(), expect.size());
                else q::activation_from_float(T::kActType)(x.data(), expect.data(), k);
                REQUIRE(got == expect);
            }
        });
    }
}
