// The activation quantizer of the integer-dot matmul (matmul_q8.comp): one block of 32 F32
// activations to Q8_0 or Q8_1 levels, producing the same bytes as the CPU backend's quantizer
// (quant::activation_from_float, llama.cpp's x86 quantize_row_q8_0/q8_1): amax over the block,
// id = 127 / amax, level = round_half_even(x * id), d = fp16(amax / 127) and, for Q8_1,
// s = fp16(d * sum(levels)) with the unrounded d.
//
// Vulkan allows 2.5 ulp for a float division, so the two quotients are computed with integers
// (div_rn: correctly rounded like the CPU's IEEE division); the one product per element is
// exact-rounded in Vulkan already (`precise` keeps it a plain multiply). tests/backends/
// test_vulkan_layouts.cpp compares the bytes and both quotients with the CPU's through
// act_quant_probe.comp. Out of scope: blocks with amax below 2^-120 (127 / amax overflows and
// x86 SIMD and scalar code disagree on the bytes), which activations never reach.
// ref: quant/activation_quant.cpp (quantize_block_x86), quant/float16.h (fp32_to_fp16)

const uint kQ8Block = 32;  // activations per Q8_0 / Q8_1 block

// a / b rounded to nearest, ties to even, for finite a, b > 0 (subnormals allowed) whose quotient
// is a normal float; returns +inf on overflow and 0 on underflow. Long division of the 24-bit
// significands gives 24 quotient bits and the remainder decides the rounding.
float div_rn(float a, float b) {
    uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    int ea = int(ua >> 23), eb = int(ub >> 23);
    uint ma = ua & 0x7FFFFFu, mb = ub & 0x7FFFFFu;
    if (ea == 0) {  // subnormal: normalize so bit 23 is set
        const int shift = 23 - findMSB(ma);
        ma <<= shift;
        ea = 1 - shift;
    } else {
        ma |= 0x800000u;
    }
    if (eb == 0) {
        const int shift = 23 - findMSB(mb);
        mb <<= shift;
        eb = 1 - shift;
    } else {
        mb |= 0x800000u;
    }
    int e = ea - eb + 127;  // biased exponent of a quotient in [1, 2)
    if (ma < mb) {
        ma <<= 1;
        e -= 1;
    }
    // Restoring division: after the loop q = floor(ma * 2^23 / mb) in [2^23, 2^24) and r is
    // twice the remainder, so r > mb means the rest is above half an ulp.
    uint q = 0u, r = ma;
    for (int i = 0; i < 24; ++i) {
        q <<= 1;
        if (r >= mb) {
            r -= mb;
            q |= 1u;
        }
        r <<= 1;
    }
    if (r > mb || (r == mb && (q & 1u) != 0u)) q += 1u;
    if (q == 0x1000000u) {  // rounded up to 2.0
        q >>= 1;
        e += 1;
    }
    if (e >= 255) return uintBitsToFloat(0x7F800000u);
    if (e <= 0) return 0.0;
    return uintBitsToFloat((uint(e) << 23) | (q & 0x7FFFFFu));
}

// The F16 bit pattern of f rounded to nearest even, as quant::fp32_to_fp16 (integer operations).
uint f32_to_f16_bits(float f) {
    const uint x = floatBitsToUint(f);
    const uint sign = (x >> 16) & 0x8000u;
    const uint a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return sign | 0x7E00u;
    if (a >= 0x477FF000u) return sign | 0x7C00u;
    if (a >= 0x38800000u) {
        uint h = (((a >> 23) - 112u) << 10) | ((a & 0x7FFFFFu) >> 13);
        const uint rem = a & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) ++h;
        return sign | h;
    }
    const uint biased_exp = a >> 23;
    if (biased_exp < 102u) return sign;
    const uint full = (a & 0x7FFFFFu) | 0x800000u;
    const uint shift = 126u - biased_exp;
    uint h = full >> shift;
    const uint rem = full & ((1u << shift) - 1u);
    const uint half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (h & 1u) != 0u)) ++h;
    return sign | h;
}

// One block: levels[i] holds elements 4i .. 4i + 3 as signed bytes (element 4i in bits 0-7, the
// byte order of BlockQ8_0::qs); scales = d's F16 bits, and for Q8_1 s's F16 bits << 16. id and d
// are the two quotients before any F16 rounding (the tests compare them too).
void quantize_q8_block(float v[kQ8Block], bool with_sum, out uint levels[8], out uint scales, out float id,
                       out float d) {
    float amax = 0.0;
    for (uint j = 0u; j < kQ8Block; ++j) amax = max(amax, abs(v[j]));
    id = amax != 0.0 ? div_rn(127.0, amax) : 0.0;
    d = amax != 0.0 ? div_rn(amax, 127.0) : 0.0;
    int sum = 0;
    for (uint i = 0u; i < 8u; ++i) {
        uint word = 0u;
        for (uint b = 0u; b < 4u; ++b) {
            precise float scaled = v[4u * i + b] * id;
            const int level = int(roundEven(scaled));
            sum += level;
            word |= (uint(level) & 0xFFu) << (8u * b);
        }
        levels[i] = word;
    }
    scales = f32_to_f16_bits(d);
    if (with_sum) {
        precise float s = d * float(sum);
        scales |= f32_to_f16_bits(s) << 16;
    }
}

// ---- Q8_K (the K-quants' and IQ4_XS's activations) ------------------------------------------
// ref: quant/ref_q6_q8_k.cpp (from_float_q8_k), quant/scale_search.h (nearest_int)

const uint kQ8KBlock = 256;  // activations per Q8_K block

// The scales of a Q8_K block whose first element of largest magnitude is `max` (signed):
// iscale = -127 / max and d = 1 / iscale, both 0 for an all-zero block.
void q8k_scales(float max_value, out float iscale, out float d) {
    if (max_value == 0.0) {
        iscale = 0.0;
        d = 0.0;
        return;
    }
    const float magnitude = div_rn(127.0, abs(max_value));
    iscale = max_value > 0.0 ? -magnitude : magnitude;
    const float inverse = div_rn(1.0, magnitude);
    d = iscale < 0.0 ? -inverse : inverse;
}

// The level of x: min(127, nearest_int(iscale * x)), with nearest_int as llama.cpp's builds and the
// CPU backend's AVX2 quantizer (backends/cpu/gemm_quantize_avx2.cpp) compute it: their compilers
// fuse the product with nearest_int's magic-number addition into one FMA, so the level is the
// exact product rounded half to even, not the rounded product rounded again (the two differ
// where iscale * x rounds across a half). On a Q8_K matmul that is a one-level step on a few
// activations, and in a mixture-of-experts model enough to flip a router's choice
// (synth-qwen3moe-q4_k_m on vulkan0 without it: mean KL 0.012, max |logit diff| 5.2).
// EXACT: the FMA in double (cpu_math.glsl, included before this file). Otherwise the product's
// rounding error from Dekker's exact product (Veltkamp splitting, `precise` keeps every
// operation apart), which decides the halves without fp64 or a fused fma(), which GLSL does
// not promise (lavapipe splits it).
// ref: Dekker, "A floating-point technique for extending the available precision" (1971),
// mul12; IEEE 754-2008 5.4.1 (fusedMultiplyAdd)
#if !defined(EXACT)
// a * b - round(a * b), exactly, for |a * b| well inside float's range.
float product_error(float a, float b, float p) {
    const float kSplit = 4097.0;  // 2^12 + 1: 12-bit halves of a 24-bit mantissa
    precise float ca = kSplit * a;
    precise float a_hi = ca - (ca - a);
    precise float a_lo = a - a_hi;
    precise float cb = kSplit * b;
    precise float b_hi = cb - (cb - b);
    precise float b_lo = b - b_hi;
    precise float e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo;
    return e;
}
#endif

int q8k_level(float iscale, float x) {
#if defined(EXACT)
    const float kMagic = 12582912.0;  // 1.5 * 2^23: the sum's low mantissa bits are the integer
    precise float shifted = cpu_fma(iscale, x, kMagic);
    precise float level = shifted - kMagic;
    return min(127, int(level));
#else
    precise float p = iscale * x;
    precise float r = roundEven(p);
    // Levels are at most 127 in magnitude, so the split cannot overflow unless iscale does
    // (amax below ~1e-33); there the rounded product is kept.
    if (abs(iscale) > 1e33 || abs(p) > 4194303.0) return min(127, int(r));
    precise float e = product_error(iscale, x, p);
    // The exact product is r + (p - r) + e with p - r exact and |p - r| <= 0.5; compare it with
    // the halves r +- 0.5 by the signs of exact differences (a float sum is 0 only when exact).
    precise float above = (p - r - 0.5) + e;
    precise float below = (p - r + 0.5) + e;
    int level = int(r);
    if (above > 0.0 || (above == 0.0 && (level & 1) != 0)) level += 1;
    else if (below < 0.0 || (below == 0.0 && (level & 1) != 0)) level -= 1;
    return min(127, level);
#endif
}
