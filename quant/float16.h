// IEEE half (fp16) and bfloat16 <-> fp32 conversions, rounding to nearest-even like ggml.
//
// Scales inside quantized blocks and whole F16/BF16 tensors are stored as these 16-bit patterns;
// every reference quantizer rounds its scales through them, so the rounding must match
// llama.cpp's bit for bit for our quantized files to equal its. Written with integer operations
// only, so the result does not depend on the compiler's floating-point flags.
// ref: IEEE 754-2008 binary16; ggml/src/ggml-impl.h (ggml_compute_fp32_to_bf16)
#pragma once

#include <bit>
#include <cstdint>

namespace deskside::quant {

inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000 | (mant << 13));  // inf / NaN
    if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return std::bit_cast<float>(sign);
    // Subnormal half: normalize into an fp32 exponent.
    uint32_t e = 113;
    while ((mant & 0x400) == 0) {
        mant <<= 1;
        --e;
    }
    return std::bit_cast<float>(sign | (e << 23) | ((mant & 0x3FF) << 13));
}

inline uint16_t fp32_to_fp16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
    const uint32_t abs = x & 0x7FFFFFFF;
    if (abs > 0x7F800000) return sign | 0x7E00;   // NaN -> quiet NaN
    if (abs >= 0x477FF000) return sign | 0x7C00;  // >= 65520 rounds to infinity
    if (abs >= 0x38800000) {                      // normal half (>= 2^-14)
        const uint32_t mant = abs & 0x7FFFFF;
        uint32_t h = ((((abs >> 23) - 112) << 10) | (mant >> 13));
        const uint32_t rem = mant & 0x1FFF;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // may carry into the exponent
        return sign | static_cast<uint16_t>(h);
    }
    // Subnormal half: the value in units of 2^-24, rounded to nearest-even.
    const uint32_t biased_exp = abs >> 23;
    if (biased_exp < 102) return sign;  // below 2^-25: rounds to zero
    const uint32_t full = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - biased_exp;  // 14..24
    uint32_t h = full >> shift;
    const uint32_t rem = full & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return sign | static_cast<uint16_t>(h);
}

inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 64);  // quiet NaN
    return static_cast<uint16_t>((x + (0x7FFF + ((x >> 16) & 1))) >> 16);
}

}  // namespace deskside::quant
