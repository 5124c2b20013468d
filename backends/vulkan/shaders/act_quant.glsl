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

// The level of x: min(127, nearest_int(iscale * x)) of the rounded product (`precise` keeps the
// multiply apart), which nearest_int's magic-number addition rounds half to even: the reference's
// and llama.cpp's rounding (its quantize_row_q8_K_ref is built without FMA) and the CPU
// backend's (backends/cpu/gemm_quantize_avx2.cpp rounds the product explicitly since GCC fused
// it with the addition, 2026-12-03). Both variants.
int q8k_level(float iscale, float x) {
    precise float scaled = iscale * x;
    return min(127, int(roundEven(scaled)));
}
