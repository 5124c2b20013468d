// Scalar building blocks shared by the CUDA kernels and their host tests: a macro that makes a
// function callable from both sides, float operations that no compiler may fuse, the half and
// bfloat16 conversions of quant/float16.h, dp4a and the CPU's expf (glibc's arithmetic).
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

#include "backends/exp2f_table.h"

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

DESKSIDE_HD inline uint64_t double_to_bits(double d) {
#if defined(__CUDA_ARCH__)
    return static_cast<uint64_t>(__double_as_longlong(d));
#else
    return std::bit_cast<uint64_t>(d);
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
// The square root, correctly rounded on both sides (IEEE).
DESKSIDE_HD inline float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(a);
#else
    return std::sqrt(a);
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
DESKSIDE_HD inline double ddiv_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}
// a * b + c rounded once, in double.
DESKSIDE_HD inline double dfma_rn(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
    return __fma_rn(a, b, c);
#else
    return std::fma(a, b, c);
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

// expf as the CPU backend gets it from glibc (2.28 and later) on x86-64 with FMA, where the
// dynamic linker picks __expf_fma: the generic algorithm compiled with every a * b + c fused.
// Equal to glibc 2.36's __expf_fma on all 2^32 float inputs (checked once, exhaustively; the
// unfused variant differs on 2); tests/backends/test_cuda_exact_ops.cpp checks a stride of them
// against the host's expf on every run.
// A correctly rounded exp is not enough: glibc's expf is not correctly rounded on 7.6e-5 of the
// inputs, and attention calls exp once per position and head, so only
// glibc's own arithmetic gives the CPU's bits.
// ref: glibc sysdeps/ieee754/flt-32/e_expf.c and e_exp2f_data.c (Szabolcs Nagy, from ARM's
// optimized-routines): x = (k + r) ln2 / 32 with k an integer (rounded by adding 1.5 * 2^52),
// e^x = 2^(k / 32) * 2^(r / 32), 2^(i / 32) from a table, 2^(r / 32) by a cubic.
struct ExpfTable {
    // Bits of 2^(i / 32) rounded to double, less i << 47 (the exponent part k adds back).
    uint64_t bits[32];
};
constexpr ExpfTable make_expf_table() {
    ExpfTable t{};
    for (int i = 0; i < 32; ++i) t.bits[i] = backends::kExp2fTable[i];  // the format's data, held once
    return t;
}
DESKSIDE_CONSTANT constexpr ExpfTable kExpfTableDevice = make_expf_table();
inline constexpr ExpfTable kExpfTableHost = make_expf_table();

DESKSIDE_HD inline float expf_libm(float x) {
    const uint32_t ux = float_to_bits(x);
    const uint32_t abstop = (ux >> 20) & 0x7FF;
    if (abstop >= 0x42B) {                            // |x| >= 88 or NaN
        if (ux == 0xFF800000u) return 0.0f;           // -inf
        if (abstop >= 0x7F8) return add_rn(x, x);     // +inf, NaN
        if (x > 0x1.62e42ep6f) return bits_to_float(0x7F800000u);  // overflow: +inf
        if (x < -0x1.9fe368p6f) return 0.0f;                       // underflow: +0
    }
    constexpr double kInvLn2N = 0x1.71547652b82fep+0 * 32;
    constexpr double kShift = 0x1.8p+52;
    constexpr double kC0 = 0x1.c6af84b912394p-5 / (32.0 * 32 * 32), kC1 = 0x1.ebfce50fac4f3p-3 / (32.0 * 32),
                     kC2 = 0x1.62e42ff0c52d6p-1 / 32;
    const double xd = static_cast<double>(x);
    double kd = dfma_rn(kInvLn2N, xd, kShift);  // k + 1.5 * 2^52: k in the low bits
    const uint64_t ki = double_to_bits(kd);
    kd = dsub_rn(kd, kShift);
    const double r = dfma_rn(kInvLn2N, xd, -kd);
#if defined(__CUDA_ARCH__)
    const uint64_t t = kExpfTableDevice.bits[ki % 32] + (ki << 47);
#else
    const uint64_t t = kExpfTableHost.bits[ki % 32] + (ki << 47);
#endif
    const double s = bits_to_double(t);
    const double z = dfma_rn(kC0, r, kC1);
    const double r2 = dmul_rn(r, r);
    const double y = dfma_rn(z, r2, dfma_rn(kC2, r, 1.0));
    return static_cast<float>(dmul_rn(y, s));
}

}  // namespace deskside::backends::cuda::device
