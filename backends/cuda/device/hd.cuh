// Scalar building blocks shared by the CUDA kernels and their host tests: a macro that makes a
// function callable from both sides, float operations that no compiler may fuse, the half and
// bfloat16 conversions of quant/float16.h, dp4a and an exp that rounds like the CPU's.
//
// Everything here compiles as plain C++ under g++ (DESKSIDE_HD is empty there), so
// tests/backends/test_cuda_device_code.cpp runs the exact code the kernels run and compares it
// with quant/ bit for bit. Bit equality needs every float product and sum rounded on its own, as
// quant/'s references do (quant/strict_fp.h): on the device the *_rn intrinsics guarantee it
// (nvcc would otherwise contract a*b+c into an FMA); on the host the includer must not enable
// FP contraction (the test includes quant/strict_fp.h first).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DESKSIDE_HD __host__ __device__
#define DESKSIDE_CONSTANT __constant__
#else
#define DESKSIDE_HD
#define DESKSIDE_CONSTANT
#endif

#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

namespace deskside::backends::cuda::device {

// Threads of a warp; the kernels' fixed reduction trees are written for this width.
inline constexpr int kWarpLanes = 32;

// ---- bits -----------------------------------------------------------------------------------

DESKSIDE_HD inline float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    return std::bit_cast<float>(u);
#endif
}

DESKSIDE_HD inline uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    return std::bit_cast<uint32_t>(f);
#endif
}

DESKSIDE_HD inline double bits_to_double(uint64_t u) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double(static_cast<long long>(u));
#else
    return std::bit_cast<double>(u);
#endif
}

// Little-endian loads that work at any alignment (block fields sit at odd offsets).
DESKSIDE_HD inline uint32_t load_u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
}
DESKSIDE_HD inline uint32_t load_u32(const int8_t* p) { return load_u32(reinterpret_cast<const uint8_t*>(p)); }

// ---- float operations, each rounded once --------------------------------------------------

DESKSIDE_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
DESKSIDE_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
DESKSIDE_HD inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
DESKSIDE_HD inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
// a * b + c rounded once (IEEE fma on both sides, so the same bits).
DESKSIDE_HD inline float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}
DESKSIDE_HD inline double dmul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
DESKSIDE_HD inline double dadd_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
DESKSIDE_HD inline double dsub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}

// Round to an integral value, ties to even (std::nearbyint in the default rounding mode).
DESKSIDE_HD inline float round_half_even(float x) {
#if defined(__CUDA_ARCH__)
    return rintf(x);
#else
    return std::nearbyint(x);
#endif
}

DESKSIDE_HD inline float abs_f(float x) { return fabsf(x); }

// quant::nearest_int: ties to even through the 1.5 * 2^23 trick, the same bits for any input.
DESKSIDE_HD inline int nearest_int(float x) {
    const uint32_t bits = float_to_bits(add_rn(x, 12582912.0f));
    return static_cast<int>(bits & 0x007FFFFF) - 0x00400000;
}

// ---- half and bfloat16 (quant/float16.h, integer operations only) ---------------------------

DESKSIDE_HD inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp == 0x1F) return bits_to_float(sign | 0x7F800000 | (mant << 13));
    if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return bits_to_float(sign);
    uint32_t e = 113;
    while ((mant & 0x400) == 0) {
        mant <<= 1;
        --e;
    }
    return bits_to_float(sign | (e << 23) | ((mant & 0x3FF) << 13));
}

DESKSIDE_HD inline uint16_t fp32_to_fp16(float f) {
    const uint32_t x = float_to_bits(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
    const uint32_t abs = x & 0x7FFFFFFF;
    if (abs > 0x7F800000) return sign | 0x7E00;
    if (abs >= 0x477FF000) return sign | 0x7C00;
    if (abs >= 0x38800000) {
        const uint32_t mant = abs & 0x7FFFFF;
        uint32_t h = ((((abs >> 23) - 112) << 10) | (mant >> 13));
        const uint32_t rem = mant & 0x1FFF;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
        return sign | static_cast<uint16_t>(h);
    }
    const uint32_t biased_exp = abs >> 23;
    if (biased_exp < 102) return sign;
    const uint32_t full = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - biased_exp;
    uint32_t h = full >> shift;
    const uint32_t rem = full & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return sign | static_cast<uint16_t>(h);
}

DESKSIDE_HD inline float bf16_to_fp32(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

DESKSIDE_HD inline uint16_t fp32_to_bf16(float f) {
    const uint32_t x = float_to_bits(f);
    if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 64);
    return static_cast<uint16_t>((x + (0x7FFF + ((x >> 16) & 1))) >> 16);
}

DESKSIDE_HD inline float round_to_f16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// ---- integer dot of 4 packed int8 ------------------------------------------------------------

// c + sum of the four byte products of a and b, each byte signed. __dp4a on the device (sm_61+);
// the loop gives the same integer everywhere else.
DESKSIDE_HD inline int dp4a(uint32_t a, uint32_t b, int c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
    return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
    for (int i = 0; i < 4; ++i) {
        c += static_cast<int>(static_cast<int8_t>(a >> (8 * i))) * static_cast<int>(static_cast<int8_t>(b >> (8 * i)));
    }
    return c;
#endif
}

// The sum of 4 packed signed bytes.
DESKSIDE_HD inline int byte_sum(uint32_t a) { return dp4a(a, 0x01010101u, 0); }

// ---- exp ---------------------------------------------------------------------------------------

// backends/exp_rounded.h on both sides: e^x evaluated in double and rounded once, so the device
// gets the CPU's (correctly rounded) exp rather than CUDA's expf (up to 2 ulp off).
DESKSIDE_HD inline float exp_rounded(float x) {
    if (x > 88.72284f) return bits_to_float(0x7F800000u);
    if (x < -104.0f) return 0.0f;
    if (x != x) return x;
    constexpr double kLog2e = 1.4426950408889634;
    constexpr double kLn2Hi = 0.693147180369123816490;
    constexpr double kLn2Lo = 1.90821492927058770002e-10;
    constexpr double kInvFact[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                     1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
                                     1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        0.5,
                                     1.0,                1.0};
#if defined(__CUDA_ARCH__)
    const double k = rint(dmul_rn(static_cast<double>(x), kLog2e));
#else
    const double k = std::nearbyint(static_cast<double>(x) * kLog2e);
#endif
    const double r = dsub_rn(dsub_rn(static_cast<double>(x), dmul_rn(k, kLn2Hi)), dmul_rn(k, kLn2Lo));
    double e = 1.0 / 87178291200.0;
    for (int i = 0; i < 14; ++i) e = dadd_rn(dmul_rn(e, r), kInvFact[i]);
    const int ki = static_cast<int>(k);
    const int k1 = ki / 2, k2 = ki - k1;
    const double scaled = dmul_rn(dmul_rn(e, bits_to_double(static_cast<uint64_t>(k1 + 1023) << 52)),
                                  bits_to_double(static_cast<uint64_t>(k2 + 1023) << 52));
    return static_cast<float>(scaled);
}

}  // namespace deskside::backends::cuda::device
