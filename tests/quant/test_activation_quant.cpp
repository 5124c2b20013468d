// The x86-style activation quantizers: llama.cpp's SIMD quantize_row_q8_0/q8_1 scale by
// 127 / amax and round half to even (_mm256_round_ps with _MM_ROUND_NEAREST), unlike the
// reference quantizer (roundf: half away from zero). Expected levels below follow from that
// rule by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "quant/activation_quant.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace q = deskside::quant;
using q::TypeId;

namespace {

// A block whose absmax is 127, so both quantizers scale by exactly 1 and only rounding differs.
std::vector<float> tie_block() {
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 3.5f;
    x[4] = 0.5f;
    x[5] = -1.5f;
    x[6] = 2.4f;
    return x;
}

}  // namespace

TEST_CASE("Q8_0 activations round half to even, weights half away from zero", "[quant]") {
    const auto x = tie_block();
    q::BlockQ8_0 act{}, ref{};
    q::activation_from_float(TypeId::Q8_0)(x.data(), &act, 32);
    q::quant_traits(TypeId::Q8_0)->from_float(x.data(), &ref, 32);
    const int expected_act[] = {127, 2, -2, 4, 0, -2, 2};
    const int expected_ref[] = {127, 3, -3, 4, 1, -2, 2};
    for (int j = 0; j < 7; ++j) {
        INFO("element " << j);
        CHECK(act.qs[j] == expected_act[j]);
        CHECK(ref.qs[j] == expected_ref[j]);
    }
    CHECK(q::fp16_to_fp32(act.d) == 1.0f);
    CHECK(act.d == ref.d);
}

TEST_CASE("Q8_1 activations carry s = d * sum of levels", "[quant]") {
    auto x = tie_block();
    q::BlockQ8_1 act{};
    q::activation_from_float(TypeId::Q8_1)(x.data(), &act, 32);
    CHECK(act.qs[1] == 2);
    CHECK(act.qs[2] == -2);
    CHECK(q::fp16_to_fp32(act.s) == 127.0f + 2 - 2 + 4 + 0 - 2 + 2);  // d == 1

    // A scale that is not a power of two: levels are round(x * 127 / amax) as one float multiply.
    for (float& v : x) v *= 0.0123f;
    q::activation_from_float(TypeId::Q8_1)(x.data(), &act, 32);
    const float id = 127.f / (127.0f * 0.0123f);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
        CHECK(act.qs[j] == static_cast<int>(std::nearbyint(x[j] * id)));
        sum += act.qs[j];
    }
    const float d = (127.0f * 0.0123f) / 127.f;
    CHECK(act.d == q::fp32_to_fp16(d));
    CHECK(act.s == q::fp32_to_fp16(d * static_cast<float>(sum)));
}

TEST_CASE("other activation types use the traits' quantizer", "[quant]") {
    for (TypeId t : {TypeId::Q8_K, TypeId::F16, TypeId::BF16, TypeId::F32}) {
        CHECK(q::activation_from_float(t) == q::quant_traits(t)->from_float);
    }
    CHECK(q::activation_from_float(TypeId::IQ2_XXS) == nullptr);
}
