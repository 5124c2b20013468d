// The reference dots of the low-bit i-quants (quant/ref_iq_lowbit.cpp) against their own
// dequantizers, which tests/py/test_iq_dequantize.py holds bit-exact with llama.cpp's gguf-py:
// on every row of llama-quantize's tensors in ../shared/models/synth-k-iq*.gguf and on random
// blocks (extreme scales and every codebook entry), vec_dot(w, a) equals the double-precision
// dot of to_float(w) and to_float(a) within (n_blocks + 4) * 4 * 2^-24 * sum |w_i a_i|: the
// integer sum inside a block is exact, so only the block scale's product, its product with the
// sum, the sum over blocks and the dequantized values' own roundings differ.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "quant/activation_quant.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"
#include "support/paths.h"

namespace q = deskside::quant;
using q::TypeId;

namespace {

constexpr TypeId kLowBit[] = {TypeId::IQ2_XXS, TypeId::IQ2_XS, TypeId::IQ2_S, TypeId::IQ3_XXS,
                              TypeId::IQ3_S,   TypeId::IQ1_S,  TypeId::IQ1_M};

bool is_low_bit(TypeId t) {
    for (TypeId l : kLowBit) {
        if (l == t) return true;
    }
    return false;
}

std::vector<uint8_t> q8k_activations(int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float& v : x) v = dist(rng);
    std::vector<uint8_t> a(q::row_bytes(TypeId::Q8_K, n));
    q::activation_from_float(TypeId::Q8_K)(x.data(), a.data(), n);
    return a;
}

// |vec_dot - exact dot of the dequantized rows| / the bound of the top of the file.
double dot_error_ratio(TypeId type, const uint8_t* w, const std::vector<uint8_t>& a, int64_t n) {
    const q::QuantTraits* t = q::quant_traits(type);
    std::vector<float> wd(n), ad(n);
    t->to_float(w, wd.data(), n);
    q::quant_traits(TypeId::Q8_K)->to_float(a.data(), ad.data(), n);
    double exact = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
        exact += double(wd[i]) * ad[i];
        magnitude += std::fabs(double(wd[i]) * ad[i]);
    }
    const double got = t->vec_dot(n, w, a.data());
    const double bound = double(n / q::kQKK + 4) * 4.0 / (1 << 24) * magnitude;
    return bound > 0 ? std::fabs(got - exact) / bound : (got == exact ? 0 : INFINITY);
}

}  // namespace

TEST_CASE("low-bit i-quants: vec_dot agrees with dequantize + dot on llama-quantize's tensors", "[quant][gguf]") {
    std::mt19937 rng(7);
    int rows_checked[32] = {};
    for (const char* suffix : {"iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"}) {
        const std::string path = deskside::test::shared_path(std::string("models/synth-k-") + suffix + ".gguf");
        const auto file = deskside::models::GgufFile::open(path);
        for (const auto& t : file.tensors()) {
            if (!is_low_bit(t.type) || t.shape.size() != 2) continue;
            const int64_t k = t.shape[0];
            const size_t row = q::row_bytes(t.type, k);
            const auto a = q8k_activations(k, rng);
            for (int64_t r = 0; r < t.shape[1]; r += 37) {
                INFO(suffix << " " << t.name << " row " << r);
                CHECK(dot_error_ratio(t.type, t.data + r * row, a, k) <= 1.0);
                ++rows_checked[static_cast<int>(t.type)];
            }
        }
    }
    for (TypeId type : kLowBit) {
        INFO(q::type_info(type).name);
        CHECK(rows_checked[static_cast<int>(type)] > 0);  // the files hold every one of the seven types
    }
}

TEST_CASE("low-bit i-quants: vec_dot agrees with dequantize + dot on random blocks", "[quant]") {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> mag(0.001f, 0.05f);
    for (TypeId type : kLowBit) {
        INFO(q::type_info(type).name);
        const q::QuantTraits* t = q::quant_traits(type);
        REQUIRE(t != nullptr);
        CHECK(t->vec_dot_type == TypeId::Q8_K);
        CHECK(t->from_float == nullptr);
        for (int64_t n : {256, 1024, 4096}) {
            std::vector<uint8_t> w(q::row_bytes(type, n));
            for (auto& b : w) b = static_cast<uint8_t>(rng());
            const size_t block = q::type_info(type).block_bytes;
            for (size_t at = 0; at < w.size(); at += block) {
                const uint16_t d = q::fp32_to_fp16((rng() & 1 ? -1.0f : 1.0f) * mag(rng));
                if (type == TypeId::IQ1_M) {  // d is the top nibbles of the four scale words
                    uint16_t sc[4];
                    std::memcpy(sc, w.data() + at + offsetof(q::BlockIq1M, scales), 8);
                    for (int i = 0; i < 4; ++i) {
                        sc[i] = static_cast<uint16_t>((sc[i] & 0x0FFF) | ((d >> (4 * i)) & 0xF) << 12);
                    }
                    std::memcpy(w.data() + at + offsetof(q::BlockIq1M, scales), sc, 8);
                } else {
                    std::memcpy(w.data() + at, &d, 2);  // every other block starts with d
                }
            }
            const auto a = q8k_activations(n, rng);
            INFO("n=" << n);
            CHECK(dot_error_ratio(type, w.data(), a, n) <= 1.0);
        }
    }
}
