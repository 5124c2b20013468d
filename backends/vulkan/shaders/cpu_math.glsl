// The CPU backend's scalar math, reproduced bit for bit on devices with shaderFloat64 (the
// `*_exact` shader variants, chosen by the backend where DeviceCaps::fp64 is set).
//
// Why: quantized models round activations to Q8 levels, so a one-ulp difference in an exp() or a
// sum order upstream moves an activation a whole level now and then, and greedy tokens part from
// the CPU's at near ties (docs/VULKAN.md, "Bit-exact ops"). The CPU computes expf with libm and
// some sums in double; a device's own exp() is a few ulps off and has no double sums.
//
// cpu_expf: glibc's expf is correctly rounded except on 7.6e-5 of the float inputs in
// [-104, 88] (measured against expl, 2.2e9 inputs); this evaluates e^x in double to about 1e-17
// relative and rounds once to float, so it is correctly rounded and equals the CPU's expf on all
// but those rare inputs.
// ref: range reduction x = k ln2 + r with a two-part ln2 (Cody & Waite), Taylor series of e^r on
// |r| <= ln2 / 2 (14 terms: the remainder is below 4e-18).

// cpu_fma: the CPU's fused multiply-add (its AVX2 kernels' _mm256_fmadd_ps, std::fma). GLSL's
// fma() does not promise one rounding, and lavapipe does split it into a multiply and an add
// (measured: every Q8_0 matmul of stories260K differed until this). With EXACT it is computed in
// double: a * b is exact there (2 x 24 bits), p + c is rounded once more, and the double's
// rounding error (TwoSum) decides the one case where rounding that to float could go the wrong
// way: a sum exactly halfway between two floats. Without EXACT it is GLSL's fma(), which a
// device with a real FMA unit fuses.
// ref: Knuth, TAOCP vol. 2, 4.2.2 (TwoSum); IEEE 754-2008 5.4.1 (fusedMultiplyAdd)

#if !defined(EXACT)
float cpu_fma(float a, float b, float c) { return fma(a, b, c); }
#else
// Everything below needs GLSL 4.50's double type (SPIR-V Float64 capability).

float cpu_fma(float a, float b, float c) {
    precise double p = double(a) * double(b);
    precise double s = p + double(c);
    precise double t = s - p;
    precise double e = (p - (s - t)) + (double(c) - t);  // s + e == a * b + c exactly
    float r = float(s);
    if (e == 0.0LF || r == 0.0 || isinf(r)) return r;
    // Is s exactly halfway between r and its neighbour on s's side?
    precise double d = s - double(r);
    if (d == 0.0LF) return r;  // s is a float: the true value rounds to it (|e| < half its ulp)
    const uint bits = floatBitsToUint(r);
    const bool away = (d > 0.0LF) == (r > 0.0);  // s lies beyond |r|
    const uint neighbour_bits = away ? bits + 1u : bits - 1u;
    precise double midpoint = (double(r) + double(uintBitsToFloat(neighbour_bits))) * 0.5LF;
    if (s != midpoint) return r;
    // A tie that is not one: the exact value lies on e's side of the midpoint.
    const bool beyond = (e > 0.0LF) == (d > 0.0LF);
    return beyond ? uintBitsToFloat(neighbour_bits) : r;
}

float cpu_expf(float x) {
    if (x > 88.72284) return uintBitsToFloat(0x7f800000u);  // +inf, as expf overflows
    if (x < -104.0) return 0.0;                              // below the smallest subnormal's half
    if (isnan(x)) return x;
    const double kLog2e = 1.4426950408889634LF;
    const double kLn2Hi = 0.693147180369123816490LF;  // 32 significant bits: k * kLn2Hi is exact
    const double kLn2Lo = 1.90821492927058770002e-10LF;
    precise double k = roundEven(double(x) * kLog2e);
    precise double r = (double(x) - k * kLn2Hi) - k * kLn2Lo;
    precise double e = 1.0LF / 87178291200.0LF;  // 1 / 14!
    const double kInvFact[14] = double[14](1.0LF / 6227020800.0LF, 1.0LF / 479001600.0LF, 1.0LF / 39916800.0LF,
                                           1.0LF / 3628800.0LF, 1.0LF / 362880.0LF, 1.0LF / 40320.0LF,
                                           1.0LF / 5040.0LF, 1.0LF / 720.0LF, 1.0LF / 120.0LF, 1.0LF / 24.0LF,
                                           1.0LF / 6.0LF, 0.5LF, 1.0LF, 1.0LF);
    for (int i = 0; i < 14; ++i) e = e * r + kInvFact[i];
    // 2^k in two factors, each a normal double, so k down to -150 stays exact.
    const int ki = int(k);
    const int k1 = ki / 2, k2 = ki - k1;
    precise double scaled = e * packDouble2x32(uvec2(0u, uint(k1 + 1023) << 20)) *
                            packDouble2x32(uvec2(0u, uint(k2 + 1023) << 20));
    return float(scaled);
}
#endif
