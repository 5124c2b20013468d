// The CPU backend's scalar math, reproduced bit for bit on devices with shaderFloat64 (the
// `*_exact` shader variants, chosen by the backend where DeviceCaps::fp64 is set).
//
// Why: quantized models round activations to Q8 levels, so a one-ulp difference in an exp() or a
// sum order upstream moves an activation a whole level now and then, and greedy tokens part from
// the CPU's at near ties (docs/VULKAN.md, "Bit-exact ops"). The CPU computes expf with libm and
// some sums in double; a device's own exp() is a few ulps off and has no double sums.
//
// cpu_expf: glibc's expf, the CPU's std::exp, bit for bit: glibc's own algorithm with its four
// fmas emulated in unfused double operations (Dekker's product, then TwoSum), since a shader's
// fma() on doubles is not promised to be fused. A correctly rounded exp is not enough: glibc's
// expf is not correctly rounded on 7.6e-5 of the float inputs. The C++ twin, checked against
// glibc on the host, is backends/expf_glibc.h (the same operations in the same order).
// ref: glibc sysdeps/ieee754/flt-32/e_expf.c and e_exp2f_data.c: x = (k + r) ln2 / 32 with k an
// integer, e^x = 2^(k / 32) * 2^(r / 32), 2^(i / 32) from a table, 2^(r / 32) by a cubic.

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

// a * b + c: the exact product as two doubles (Veltkamp's split), then TwoSum; the last step
// rounds the sum of three doubles twice, which differs from a fused result only on a tie.
double fma_emulated(double a, double b, double c) {
    const double kSplit = 134217729.0LF;  // 2^27 + 1
    precise double p = a * b;
    precise double ca = kSplit * a;
    precise double cb = kSplit * b;
    precise double ah = ca - (ca - a);
    precise double al = a - ah;
    precise double bh = cb - (cb - b);
    precise double bl = b - bh;
    precise double p_err = ((ah * bh - p) + ah * bl + al * bh) + al * bl;  // p + p_err == a * b
    precise double s = p + c;
    precise double t = s - p;
    precise double s_err = (p - (s - t)) + (c - t);  // s + s_err == p + c
    precise double r = s + (s_err + p_err);
    return r;
}

double double_of_bits(uint hi, uint lo) { return packDouble2x32(uvec2(lo, hi)); }

// The bits of 2^(i / 32) rounded to double, less i << 47 (the exponent part k adds back), as
// high and low words.
const uint kExp2fHi[32] = uint[32](
    0x3ff00000u, 0x3fefd9b0u, 0x3fefb558u, 0x3fef9301u, 0x3fef72b8u, 0x3fef5487u,
    0x3fef387au, 0x3fef1e9du, 0x3fef06feu, 0x3feef1a7u, 0x3feedea6u, 0x3feece08u,
    0x3feebfdau, 0x3feeb42bu, 0x3feeab07u, 0x3feea47eu, 0x3feea09eu, 0x3fee9f75u,
    0x3feea114u, 0x3feea589u, 0x3feeace5u, 0x3feeb737u, 0x3feec491u, 0x3feed503u,
    0x3feee89fu, 0x3feeff76u, 0x3fef199bu, 0x3fef3720u, 0x3fef5818u, 0x3fef7c97u,
    0x3fefa4afu, 0x3fefd076u);
const uint kExp2fLo[32] = uint[32](
    0x00000000u, 0xd3158574u, 0x6cf9890fu, 0xd0125b51u, 0x3c7d517bu, 0x3168b9aau,
    0x6e756238u, 0xf51fdee1u, 0x0a31b715u, 0x373aa9cbu, 0x4c123422u, 0x6061892du,
    0xd5362a27u, 0x569d4f82u, 0xdd485429u, 0xb03a5585u, 0x667f3bcdu, 0xe8ec5f74u,
    0x73eb0187u, 0x994cce13u, 0x422aa0dbu, 0xb0cdc5e5u, 0x82a3f090u, 0xb23e255du,
    0x995ad3adu, 0xf2fb5e47u, 0xdd85529cu, 0xdcef9069u, 0xdcfba487u, 0x337b9b5fu,
    0xa2a490dau, 0x5b6e4540u);

float cpu_expf(float x) {
    const uint ux = floatBitsToUint(x);
    const uint abstop = (ux >> 20) & 0x7FFu;
    if (abstop >= 0x42Bu) {                                                // |x| >= 88 or NaN
        if (ux == 0xFF800000u) return 0.0;                                 // -inf
        if (abstop >= 0x7F8u) return x + x;                                // +inf, NaN
        if (x > uintBitsToFloat(0x42B17217u)) return uintBitsToFloat(0x7F800000u);  // overflow
        if (x < uintBitsToFloat(0xC2CFF1B4u)) return 0.0;                            // underflow
    }
    const double kInvLn2N = double_of_bits(0x40471547u, 0x652b82feu);  // 32 / ln 2
    const double kShift = double_of_bits(0x43380000u, 0u);             // 1.5 * 2^52
    const double kC0 = double_of_bits(0x3ebc6af8u, 0x4b912394u);
    const double kC1 = double_of_bits(0x3f2ebfceu, 0x50fac4f3u);
    const double kC2 = double_of_bits(0x3f962e42u, 0xff0c52d6u);
    const double xd = double(x);
    precise double kd = fma_emulated(kInvLn2N, xd, kShift);  // k + 1.5 * 2^52: k in the low bits
    const uint ki = unpackDouble2x32(kd).x;
    kd = kd - kShift;
    precise double r = fma_emulated(kInvLn2N, xd, -kd);
    // The table's entry plus k << 47, a 64-bit sum whose low word k does not touch.
    const double s = double_of_bits(kExp2fHi[ki % 32u] + (ki << 15), kExp2fLo[ki % 32u]);
    precise double z = fma_emulated(kC0, r, kC1);
    precise double r2 = r * r;
    precise double y = fma_emulated(z, r2, fma_emulated(kC2, r, 1.0LF));
    precise double e = y * s;
    return float(e);
}
#endif
