// glibc's expf, computed with fused multiply-adds that are emulated by unfused double operations:
// the C++ twin of backends/vulkan/shaders/cpu_math.glsl's cpu_expf (the same operations in the
// same order), so that a test on the host checks the algorithm the shader runs against the CPU's
// own expf.
//
// Why not a correctly rounded exp: glibc's expf is not correctly rounded on 7.6e-5 of the float
// inputs, and the CPU backend calls it (std::exp) in silu, softmax and attention, so only glibc's
// own arithmetic gives the CPU's bits. Why emulated: a shader's fma() on doubles is not promised
// to be fused (lavapipe splits fma() on floats), while products and sums marked `precise` are
// rounded one by one. The emulation (Dekker's product with Veltkamp's split, then Knuth's TwoSum)
// is exact in every step but the last, which rounds the sum of three doubles twice; that differs
// from a true fma only when the first rounding lands on a tie of the second, which none of
// expf's four fmas meets on the inputs measured (tests/backends/test_vulkan_exact.cpp).
//
// Bit equality with the shader needs these double operations unfused: the default build compiles
// without FMA, so GCC cannot contract them (DESKSIDE_NATIVE=ON could).
// ref: glibc sysdeps/ieee754/flt-32/e_expf.c and e_exp2f_data.c (from ARM's optimized-routines):
// x = (k + r) ln2 / 32 with k an integer, e^x = 2^(k / 32) * 2^(r / 32), 2^(i / 32) from a
// table, 2^(r / 32) by a cubic; the table and the constants are the format's data, the same as
// backends/cuda/device/hd.cuh's expf_libm (which uses real fmas).
// ref: Dekker, "A floating-point technique for extending the available precision" (1971);
// Knuth, TAOCP vol. 2, 4.2.2 (TwoSum).
#pragma once

#include <bit>
#include <cstdint>

#include "backends/exp2f_table.h"

namespace deskside::backends {

// a * b + c: the exact product as two doubles, then the sum, rounded twice at most.
inline double fma_emulated(double a, double b, double c) {
    constexpr double kSplit = 134217729.0;  // 2^27 + 1
    const double p = a * b;
    const double ca = kSplit * a, cb = kSplit * b;
    const double ah = ca - (ca - a), al = a - ah;
    const double bh = cb - (cb - b), bl = b - bh;
    const double p_err = ((ah * bh - p) + ah * bl + al * bh) + al * bl;  // p + p_err == a * b
    const double s = p + c;
    const double t = s - p;
    const double s_err = (p - (s - t)) + (c - t);  // s + s_err == p + c
    return s + (s_err + p_err);
}

inline float expf_glibc(float x) {
    const uint32_t ux = std::bit_cast<uint32_t>(x);
    const uint32_t abstop = (ux >> 20) & 0x7FF;
    if (abstop >= 0x42B) {                                                                    // |x| >= 88 or NaN
        if (ux == 0xFF800000u) return 0.0f;                                                   // -inf
        if (abstop >= 0x7F8) return x + x;                                                    // +inf, NaN
        if (x > std::bit_cast<float>(0x42B17217u)) return std::bit_cast<float>(0x7F800000u);  // 0x1.62e42ep6
        if (x < std::bit_cast<float>(0xC2CFF1B4u)) return 0.0f;                               // -0x1.9fe368p6
    }
    const double kInvLn2N = std::bit_cast<double>(uint64_t{0x40471547652b82fe});  // 32 / ln 2
    const double kShift = std::bit_cast<double>(uint64_t{0x4338000000000000});    // 1.5 * 2^52
    const double kC0 = std::bit_cast<double>(uint64_t{0x3ebc6af84b912394});
    const double kC1 = std::bit_cast<double>(uint64_t{0x3f2ebfce50fac4f3});
    const double kC2 = std::bit_cast<double>(uint64_t{0x3f962e42ff0c52d6});
    const double xd = x;
    double kd = fma_emulated(kInvLn2N, xd, kShift);  // k + 1.5 * 2^52: k in the low bits
    const uint64_t ki = std::bit_cast<uint64_t>(kd);
    kd -= kShift;
    const double r = fma_emulated(kInvLn2N, xd, -kd);
    const double s = std::bit_cast<double>(kExp2fTable[ki % 32] + (ki << 47));
    const double z = fma_emulated(kC0, r, kC1);
    const double r2 = r * r;
    const double y = fma_emulated(z, r2, fma_emulated(kC2, r, 1.0));
    return static_cast<float>(y * s);
}

}  // namespace deskside::backends
