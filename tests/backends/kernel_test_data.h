// Random operands for the CPU kernel tests (test_gemm.cpp, test_repack.cpp): weight rows of a
// quantized type, activation rows of a vec_dot type, and the scale a dot's float rounding is
// measured against.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "quant/activation_quant.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace deskside::test {

inline std::vector<float> gaussian(size_t n, std::mt19937& rng, float sigma) {
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// Rows of `type`: quantized Gaussians (for types with a quantizer), or random bytes with every fp16 field (the block scales,
// found by name in the block layouts) set to a sane finite value.
inline std::vector<uint8_t> weight_rows(quant::TypeId type, int64_t k, int64_t rows, bool random_bytes, std::mt19937& rng) {
    const size_t row = quant::row_bytes(type, k);
    std::vector<uint8_t> data(row * rows);
    if (!random_bytes && quant::quant_traits(type)->from_float != nullptr) {
        const auto v = gaussian(static_cast<size_t>(k * rows), rng, 1.0f);
        for (int64_t r = 0; r < rows; ++r) quant::quant_traits(type)->from_float(v.data() + r * k, data.data() + r * row, k);
        return data;
    }
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> mag(0.001f, 0.05f);
    auto scale = [&](uint16_t* field) { *field = quant::fp32_to_fp16((rng() & 1 ? -1.0f : 1.0f) * mag(rng)); };
    const int64_t n_blocks = k / quant::type_info(type).block_size * rows;
    for (int64_t i = 0; i < n_blocks; ++i) {
        switch (type) {
            case quant::TypeId::Q4_0: scale(&reinterpret_cast<quant::BlockQ4_0*>(data.data())[i].d); break;
            case quant::TypeId::Q5_0: scale(&reinterpret_cast<quant::BlockQ5_0*>(data.data())[i].d); break;
            case quant::TypeId::Q8_0: scale(&reinterpret_cast<quant::BlockQ8_0*>(data.data())[i].d); break;
            case quant::TypeId::IQ4_NL: scale(&reinterpret_cast<quant::BlockIq4Nl*>(data.data())[i].d); break;
            case quant::TypeId::Q4_K: {
                auto& b = reinterpret_cast<quant::BlockQ4_K*>(data.data())[i];
                scale(&b.d), scale(&b.dmin);
                break;
            }
            case quant::TypeId::Q6_K: scale(&reinterpret_cast<quant::BlockQ6_K*>(data.data())[i].d); break;
            default: FAIL("no random blocks for this type");
        }
    }
    return data;
}

inline std::vector<uint8_t> activation_rows(quant::TypeId type, int64_t k, int64_t rows, float sigma, std::mt19937& rng) {
    const size_t row = quant::row_bytes(type, k);
    std::vector<uint8_t> data(row * rows);
    const auto v = gaussian(static_cast<size_t>(k * rows), rng, sigma);
    for (int64_t r = 0; r < rows; ++r) quant::activation_from_float(type)(v.data() + r * k, data.data() + r * row, k);
    return data;
}

// Sum of |w_i a_i| over the dequantized operands: the scale of a dot's float rounding.
inline double magnitude(quant::TypeId type, const uint8_t* w, const uint8_t* a, int64_t k) {
    const quant::QuantTraits* t = quant::quant_traits(type);
    std::vector<float> wd(k), ad(k);
    t->to_float(w, wd.data(), k);
    quant::quant_traits(t->vec_dot_type)->to_float(a, ad.data(), k);
    double sum = 0;
    for (int64_t i = 0; i < k; ++i) sum += std::fabs(double(wd[i]) * ad[i]);
    return sum;
}

inline bool runs_avx2() { return backends::cpu::cpu_features().has_avx2_kernels(); }

}  // namespace deskside::test
