// e^x for a float x, correctly rounded to float (up to double-rounding cases of probability
// ~2^-40): e^x evaluated in double to about 1e-17 relative, then rounded once. The C++ twin of
// backends/vulkan/shaders/cpu_math.glsl's cpu_expf, the same double operations in the same
// order, so a CPU op using it and the Vulkan shader give the same bits (libm's expf is not
// correctly rounded on 7.6e-5 of the float inputs in [-104, 88] on glibc 2.36, which no shader
// reproduces; docs/VULKAN.md, "Bit-exact ops").
//
// Bit equality with the shader needs these double operations unfused: the default build compiles
// the CPU's scalar files without FMA (DESKSIDE_NATIVE=ON would let GCC contract them).
// ref: Cody & Waite range reduction x = k ln2 + r with a two-part ln2; Taylor series of e^r on
// |r| <= ln2 / 2 to 14 terms (remainder below 4e-18).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace deskside::backends {

inline float exp_rounded(float x) {
    if (x > 88.72284f) return std::numeric_limits<float>::infinity();
    if (x < -104.0f) return 0.0f;
    if (std::isnan(x)) return x;
    constexpr double kLog2e = 1.4426950408889634;
    constexpr double kLn2Hi = 0.693147180369123816490;  // 32 significant bits: k * kLn2Hi is exact
    constexpr double kLn2Lo = 1.90821492927058770002e-10;
    constexpr double kInvFact[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                     1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
                                     1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        0.5,
                                     1.0,                1.0};
    const double k = std::nearbyint(static_cast<double>(x) * kLog2e);  // ties to even (default mode)
    const double r = (static_cast<double>(x) - k * kLn2Hi) - k * kLn2Lo;
    double e = 1.0 / 87178291200.0;  // 1 / 14!
    for (double c : kInvFact) e = e * r + c;
    // 2^k in two factors, each a normal double, so k down to -150 stays exact.
    const int ki = static_cast<int>(k);
    const int k1 = ki / 2, k2 = ki - k1;
    const double scaled = e * std::bit_cast<double>(static_cast<uint64_t>(k1 + 1023) << 52) *
                          std::bit_cast<double>(static_cast<uint64_t>(k2 + 1023) << 52);
    return static_cast<float>(scaled);
}

}  // namespace deskside::backends
