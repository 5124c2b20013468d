// The reference TQ1_0, TQ2_0 and MXFP4 functions (quant/ref_ternary_mxfp4.cpp) against what we
// did not write and against their own definitions:
// - our TQ2_0 quantizer reproduces llama-quantize's bytes in synth-k-tq2_0.gguf from the F32
//   synth-k.gguf (llama.cpp's TQ2_0 quantizer ignores the importance matrix the file was made with);
//   the bit-exact comparisons with gguf-py (dequantize and quantize, all three types) are in
//   tests/py/test_quant_gguf_py.py;
// - E8M0 scales decode to the powers of two the OCP MX spec defines (halved, as ggml stores them);
// - TQ1_0 and TQ2_0 quantize the same data to the same values (one quantizer, two packings), and
//   MXFP4 round-trips values already on its grid;
// - vec_dot equals the exact dot of the dequantized operands within its own float rounding:
//   (blocks + 2) * 2^-24 * sum |w_i a_i| (each block term is a product of the exact integer sum
//   and one rounded scale product, then one rounding per block added).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "models/gguf.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "support/paths.h"

namespace q = deskside::quant;
using q::TypeId;

namespace {

constexpr TypeId kTypes[] = {TypeId::TQ1_0, TypeId::TQ2_0, TypeId::MXFP4};

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma) {
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

}  // namespace

TEST_CASE("ternary and MXFP4 blocks match the GGUF type table and traits", "[quant]") {
    CHECK(q::type_info(TypeId::TQ1_0).block_bytes == sizeof(q::BlockTq1_0));
    CHECK(q::type_info(TypeId::TQ2_0).block_bytes == sizeof(q::BlockTq2_0));
    CHECK(q::type_info(TypeId::MXFP4).block_bytes == sizeof(q::BlockMxfp4));
    CHECK(q::type_info(TypeId::MXFP4).block_size == q::kQK);
    for (TypeId type : kTypes) {
        INFO(q::type_info(type).name);
        const q::QuantTraits* t = q::quant_traits(type);
        REQUIRE(t != nullptr);
        CHECK(t->from_float != nullptr);
        // ref: ggml/src/ggml-cpu/ggml-cpu.c type_traits_cpu[].vec_dot_type
        CHECK(t->vec_dot_type == (type == TypeId::MXFP4 ? TypeId::Q8_0 : TypeId::Q8_K));
    }
}

TEST_CASE("E8M0 scales decode to half of 2^(e - 127)", "[quant]") {
    // ref: OCP Microscaling Formats (MX) v1.0, 5.4.1 (E8M0: bias 127, no zero, 0xFF NaN); ggml
    // halves the scale to match its doubled E2M1 table and maps 0xFF to 2^127.
    CHECK(q::e8m0_to_fp32_half(127) == 0.5f);
    CHECK(q::e8m0_to_fp32_half(128) == 1.0f);
    CHECK(q::e8m0_to_fp32_half(130) == 4.0f);
    CHECK(q::e8m0_to_fp32_half(2) == std::ldexp(1.0f, -126));
    CHECK(q::e8m0_to_fp32_half(1) == std::ldexp(1.0f, -127));  // subnormal
    CHECK(q::e8m0_to_fp32_half(0) == std::ldexp(1.0f, -128));  // subnormal
    CHECK(q::e8m0_to_fp32_half(254) == std::ldexp(1.0f, 126));
    CHECK(q::e8m0_to_fp32_half(255) == std::ldexp(1.0f, 127));
    // The doubled table: E2M1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, times 2.
    const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int i = 0; i < 8; ++i) {
        CHECK(q::kMxfp4Values[i] == 2 * e2m1[i]);
        CHECK(q::kMxfp4Values[i + 8] == -2 * e2m1[i]);
    }
}

TEST_CASE("synth-k: our TQ2_0 quantizer writes llama-quantize's bytes", "[quant][gguf]") {
    using deskside::models::GgufFile;
    const GgufFile base = GgufFile::open(deskside::test::shared_path("models/synth-k.gguf"));
    const GgufFile tq = GgufFile::open(deskside::test::shared_path("models/synth-k-tq2_0.gguf"));
    int compared = 0;
    for (const auto& t : tq.tensors()) {
        if (t.type != TypeId::TQ2_0) continue;
        INFO(t.name);
        const auto* ref = base.find_tensor(t.name);
        REQUIRE(ref != nullptr);
        REQUIRE(ref->type == TypeId::F32);
        std::vector<uint8_t> ours(t.n_bytes);
        const auto* x = reinterpret_cast<const float*>(ref->data);
        q::quant_traits(TypeId::TQ2_0)->from_float(x, ours.data(), t.n_elements());
        CHECK(std::memcmp(ours.data(), t.data, t.n_bytes) == 0);
        ++compared;
    }
    CHECK(compared == 28);
}

TEST_CASE("TQ1_0 and TQ2_0 quantize alike; MXFP4 keeps values on its grid", "[quant]") {
    const auto x = gaussian(256 * 32, 3, 1.0f);
    const auto v1 = dequantize(TypeId::TQ1_0, quantize(TypeId::TQ1_0, x), x.size());
    const auto v2 = dequantize(TypeId::TQ2_0, quantize(TypeId::TQ2_0, x), x.size());
    CHECK(v1 == v2);
    for (size_t b = 0; b < x.size() / 256; ++b) {
        float amax = 0;
        for (size_t i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[256 * b + i]));
        const float d = q::fp16_to_fp32(q::fp32_to_fp16(amax));
        for (size_t i = 0; i < 256; ++i) {
            const float v = v1[256 * b + i];
            REQUIRE((v == 0.0f || v == d || v == -d));
        }
    }
    // Values d * level with the block's largest magnitude in [4d, 8d) (so that d is the unit the
    // quantizer picks) come back exactly; zero blocks stay zero.
    std::mt19937 rng(4);
    std::vector<float> grid(32 * 64);
    for (size_t b = 0; b < grid.size() / 32; ++b) {
        const float d = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
        for (size_t j = 0; j < 32; ++j) grid[32 * b + j] = d * static_cast<float>(q::kMxfp4Values[rng() % 16]);
        grid[32 * b + rng() % 32] = d * (rng() & 1 ? 6.0f : -4.0f);
        if (b == 5) std::fill(grid.begin() + 32 * b, grid.begin() + 32 * b + 32, 0.0f);
    }
    CHECK(dequantize(TypeId::MXFP4, quantize(TypeId::MXFP4, grid), grid.size()) == grid);
}

TEST_CASE("ternary and MXFP4 vec_dot equal the dot of the dequantized operands", "[quant]") {
    constexpr int64_t kN = 4096;
    for (TypeId type : kTypes) {
        const q::QuantTraits* t = q::quant_traits(type);
        for (float sigma : {0.02f, 1.0f, 50.0f}) {
            INFO(q::type_info(type).name << " sigma " << sigma);
            const auto w = quantize(type, gaussian(kN, 11, sigma));
            const auto a = quantize(t->vec_dot_type, gaussian(kN, 12, 0.5f));
            const auto wd = dequantize(type, w, kN);
            const auto ad = dequantize(t->vec_dot_type, a, kN);
            double exact = 0, magnitude = 0;
            for (int64_t i = 0; i < kN; ++i) {
                exact += double(wd[i]) * ad[i];
                magnitude += std::fabs(double(wd[i]) * ad[i]);
            }
            const double blocks = double(kN) / double(q::type_info(t->vec_dot_type).block_size);
            const double got = t->vec_dot(kN, w.data(), a.data());
            CHECK(std::fabs(got - exact) <= (blocks + 2) * std::ldexp(1.0, -24) * magnitude);
        }
    }
}
