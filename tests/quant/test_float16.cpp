// fp16 / bf16 conversions: checked against the CPU's own F16C conversion instructions (IEEE
// round-to-nearest-even in hardware) where the CPU has them, and against values derived by hand
// from the IEEE 754 binary16 / bfloat16 definitions.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "quant/float16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace q = deskside::quant;

namespace {

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hw_fp32_to_fp16(float f) {
    return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hw_fp16_to_fp32(uint16_t h) { return _cvtsh_ss(h); }
bool have_f16c() { return __builtin_cpu_supports("f16c"); }
#endif

bool is_nan16(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }

}  // namespace

TEST_CASE("fp16 known values follow IEEE binary16", "[quant]") {
    CHECK(q::fp32_to_fp16(0.0f) == 0x0000);
    CHECK(q::fp32_to_fp16(-0.0f) == 0x8000);
    CHECK(q::fp32_to_fp16(1.0f) == 0x3C00);
    CHECK(q::fp32_to_fp16(-2.0f) == 0xC000);
    CHECK(q::fp32_to_fp16(65504.0f) == 0x7BFF);              // largest finite
    CHECK(q::fp32_to_fp16(65519.99f) == 0x7BFF);             // just below the rounding boundary
    CHECK(q::fp32_to_fp16(65520.0f) == 0x7C00);              // tie between 65504 and 2^16: to even (inf)
    CHECK(q::fp32_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
    CHECK(q::fp32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);  // half of it: tie, to even (zero)
    CHECK(q::fp32_to_fp16(std::ldexp(1.5f, -25)) == 0x0001);
    CHECK(q::fp32_to_fp16(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 ulp: tie, to even (2)
    CHECK(q::fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie, to even
    CHECK(q::fp32_to_fp16(1.0f + std::ldexp(3.0f, -11)) == 0x3C02);  // tie, to even
    CHECK(q::fp32_to_fp16(std::numeric_limits<float>::infinity()) == 0x7C00);
    CHECK(is_nan16(q::fp32_to_fp16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(q::fp16_to_fp32(0x3555) == 0.333251953125f);  // 2^-2 * (1 + 341/1024)
    CHECK(q::fp16_to_fp32(0x0001) == std::ldexp(1.0f, -24));
    CHECK(q::fp16_to_fp32(0x03FF) == std::ldexp(1023.0f, -24));
    CHECK(std::isinf(q::fp16_to_fp32(0xFC00)));
}

TEST_CASE("fp16 -> fp32 -> fp16 is the identity on every non-NaN half", "[quant]") {
    int mismatches = 0;
    for (uint32_t h = 0; h < 0x10000; ++h) {
        if (is_nan16(static_cast<uint16_t>(h))) continue;
        mismatches += q::fp32_to_fp16(q::fp16_to_fp32(static_cast<uint16_t>(h))) != h;
    }
    CHECK(mismatches == 0);
}

#if defined(__x86_64__)
TEST_CASE("fp16 conversions equal the F16C instructions", "[quant]") {
    if (!have_f16c()) {
        WARN("CPU without F16C: hardware comparison skipped");
        return;
    }
    int widen_mismatches = 0;
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float ours = q::fp16_to_fp32(static_cast<uint16_t>(h));
        const float hw = hw_fp16_to_fp32(static_cast<uint16_t>(h));
        widen_mismatches += std::bit_cast<uint32_t>(ours) != std::bit_cast<uint32_t>(hw) && !std::isnan(hw);
    }
    CHECK(widen_mismatches == 0);

    // Narrowing: every float in the half range and around its edges, sampled by bit pattern
    // (uniform over exponents, so subnormals and ties are well covered), plus exact ties.
    std::mt19937 rng(1234);
    int narrow_mismatches = 0;
    for (int i = 0; i < 2'000'000; ++i) {
        const uint32_t bits = rng();
        const float f = std::bit_cast<float>(bits);
        if (std::isnan(f)) continue;
        narrow_mismatches += q::fp32_to_fp16(f) != hw_fp32_to_fp16(f);
    }
    for (uint32_t h = 0; h < 0x7C00; ++h) {  // midpoints between consecutive positive halves
        const uint32_t lo = std::bit_cast<uint32_t>(q::fp16_to_fp32(static_cast<uint16_t>(h)));
        const uint32_t hi = std::bit_cast<uint32_t>(q::fp16_to_fp32(static_cast<uint16_t>(h + 1)));
        const float mid = std::bit_cast<float>(lo + (hi - lo) / 2);
        narrow_mismatches += q::fp32_to_fp16(mid) != hw_fp32_to_fp16(mid);
        narrow_mismatches += q::fp32_to_fp16(-mid) != hw_fp32_to_fp16(-mid);
    }
    CHECK(narrow_mismatches == 0);
}
#endif

TEST_CASE("bf16 rounds to nearest even and keeps NaN a NaN", "[quant]") {
    CHECK(q::fp32_to_bf16(1.0f) == 0x3F80);
    CHECK(q::fp32_to_bf16(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // tie, to even
    CHECK(q::fp32_to_bf16(std::bit_cast<float>(0x3F818000u)) == 0x3F82);  // tie, to even
    CHECK(q::fp32_to_bf16(std::bit_cast<float>(0x3F808001u)) == 0x3F81);  // above the tie
    CHECK(q::fp32_to_bf16(std::bit_cast<float>(0x7F7FFFFFu)) == 0x7F80);  // FLT_MAX rounds to inf
    CHECK(q::fp32_to_bf16(-0.0f) == 0x8000);
    const uint16_t nan = q::fp32_to_bf16(std::bit_cast<float>(0x7F800001u));  // signalling NaN payload
    CHECK(std::isnan(q::bf16_to_fp32(nan)));
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = q::bf16_to_fp32(static_cast<uint16_t>(h));
        if (!std::isnan(f)) REQUIRE(q::fp32_to_bf16(f) == h);
    }
}
