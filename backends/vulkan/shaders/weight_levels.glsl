// Integer levels of 32 weights for the integer-dot matmuls, as signed bytes packed four to a
// word (element 4i in bits 0-7 of word i, the byte order of the activations' qs). Include after
// dequant.glsl (block geometry, field offsets and loaders).
//
// Legacy types, IQ4_NL and MXFP4 (matmul_q8.comp, Q8_0/Q8_1 activations): a block's value j is
// d * level[j] (+ m for Q4_1/Q5_1), so its dot with an activation block (dx, levels x[j], Q8_1
// sum s) is d * dx * sum(level[j] * x[j]) (+ m * s), the integer sum being exact.
// K-quants, IQ4_XS, TQ1_0 and TQ2_0 (matmul_q8k.comp, Q8_K activations): a 32-element unit has a scale and a
// min per 16-element half, value j = d * scale[h] * level[j] - dmin * min[h], and the dot with
// Q8_K levels is d * dx * sum_h scale[h] * dot_h - dmin * dx * sum_h min[h] * sum_h(x).
// These are the formulas of quant/ref_*.cpp's vec_dot_* and llama.cpp's.
// ref: quant/ref_legacy.cpp, quant/ref_iq4.cpp, quant/ref_q2_q3_k.cpp, quant/ref_q4_q5_k.cpp,
//      quant/ref_q6_q8_k.cpp, quant/ref_ternary_mxfp4.cpp (vec_dot_*)

#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
#define WEIGHT_HAS_MIN 1
#endif

// Every byte of `packed` (unsigned, each below 128) minus `offset` (< 128), as signed bytes:
// setting bit 7 first keeps the subtraction from borrowing across bytes, and clearing it again
// leaves the two's complement byte.
uint sub_bytes(uint packed, uint offset) {
    return ((packed | 0x80808080u) - offset * 0x01010101u) ^ 0x80808080u;
}

#if defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS)
// ref: quant/blocks.h kIq4nlValues
const int kIq4nlLevels[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

uint iq4_levels(uint nibbles) {
    uint word = 0u;
    for (uint b = 0u; b < 4u; ++b) word |= (uint(kIq4nlLevels[(nibbles >> (8u * b)) & 0xFu]) & 0xFFu) << (8u * b);
    return word;
}
#endif

#if defined(TYPE_MXFP4)
// ref: quant/blocks.h kMxfp4Values
const int kMxfp4Levels[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

uint mxfp4_levels(uint nibbles) {
    uint word = 0u;
    for (uint b = 0u; b < 4u; ++b) word |= (uint(kMxfp4Levels[(nibbles >> (8u * b)) & 0xFu]) & 0xFFu) << (8u * b);
    return word;
}
#endif

#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
// Bits first .. first + 3 of qh moved to bit 4 of bytes 0..3.
uint fifth_bits(uint qh, uint first) {
    uint word = 0u;
    for (uint b = 0u; b < 4u; ++b) word |= ((qh >> (first + b)) & 1u) << (8u * b + 4u);
    return word;
}
#endif

#if defined(TYPE_Q4_0) || defined(TYPE_Q4_1) || defined(TYPE_Q5_0) || defined(TYPE_Q5_1) || defined(TYPE_Q8_0) || \
    defined(TYPE_IQ4_NL) || defined(TYPE_MXFP4)
// levels[i] = elements 4i .. 4i + 3 of block `block` of the row at byte row_addr; d and (Q4_1,
// Q5_1) m are the block's scale and min.
void weight_levels(uint row_addr, uint block, out uint levels[8], out float d, out float m) {
    const uint a = row_addr + block * kBlockBytes;
#if defined(TYPE_MXFP4)
    d = e8m0_to_fp32_half(load_u8(a + kOffE));
#else
    d = load_f16(a + kOffD);
#endif
    m = 0.0;
#if defined(WEIGHT_HAS_MIN)
    m = load_f16(a + kOffM);
#endif
#if defined(TYPE_Q8_0)
    for (uint i = 0u; i < 8u; ++i) levels[i] = load_u32(a + kOffQs + 4u * i);
#elif defined(TYPE_MXFP4)
    for (uint i = 0u; i < 4u; ++i) {
        const uint word = load_u32_any(a + kOffQs + 4u * i);
        levels[i] = mxfp4_levels(word & 0x0F0F0F0Fu);
        levels[i + 4u] = mxfp4_levels((word >> 4) & 0x0F0F0F0Fu);
    }
#else
#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
    const uint qh = load_u32(a + kOffQh);
#endif
    // Byte i of qs holds element i (low nibble) and element i + 16 (high nibble).
    for (uint i = 0u; i < 4u; ++i) {
        const uint word = load_u32(a + kOffQs + 4u * i);
        uint lo = word & 0x0F0F0F0Fu;
        uint hi = (word >> 4) & 0x0F0F0F0Fu;
#if defined(TYPE_Q4_0)
        lo = sub_bytes(lo, 8u);
        hi = sub_bytes(hi, 8u);
#elif defined(TYPE_IQ4_NL)
        lo = iq4_levels(lo);
        hi = iq4_levels(hi);
#elif defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
        lo |= fifth_bits(qh, 4u * i);
        hi |= fifth_bits(qh, 4u * i + 16u);
#if defined(TYPE_Q5_0)
        lo = sub_bytes(lo, 16u);
        hi = sub_bytes(hi, 16u);
#endif
#endif
        levels[i] = lo;
        levels[i + 4u] = hi;
    }
#endif
}
#endif

#if defined(TYPE_Q2_K) || defined(TYPE_Q3_K) || defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K) || \
    defined(TYPE_IQ4_XS) || defined(TYPE_TQ1_0) || defined(TYPE_TQ2_0)
// Unit `unit` (32 elements) of the row at byte row_addr: levels, the scale and min of each
// 16-element half (equal halves for the 32-element groups of Q4_K, Q5_K, IQ4_XS), d and dmin
// (0 for the types without mins). Field positions as dequant.glsl's dequant_unit.
void weight_levels_k(uint row_addr, uint unit, out uint levels[8], out int scale[2], out int minv[2], out float d,
                     out float dmin) {
    const uint a = block_addr(row_addr, unit);
    const uint u = unit % kUnitsPerBlock;
    d = load_f16(a + kOffD);
    dmin = 0.0;
    minv[0] = 0;
    minv[1] = 0;
#if defined(TYPE_Q2_K) || defined(TYPE_Q3_K)
    // 2-bit fields: byte 32 * (u / 4) + j of qs, bits 2 * (u % 4).
    const uint shift = 2u * (u % 4u);
    for (uint i = 0u; i < 8u; ++i) {
        uint q = (load_u32(a + kOffQs + 32u * (u / 4u) + 4u * i) >> shift) & 0x03030303u;
#if defined(TYPE_Q3_K)
        // level = q - 4 unless bit u of hmask[j] is set.
        q |= ((load_u32(a + kOffHmask + 4u * i) >> u) & 0x01010101u) << 2;
        q = sub_bytes(q, 4u);
#endif
        levels[i] = q;
    }
    for (uint h = 0u; h < 2u; ++h) {
#if defined(TYPE_Q2_K)
        const uint sc = load_u8(a + kOffScales + 2u * u + h);
        scale[h] = int(sc & 0xFu);
        minv[h] = int(sc >> 4);
#else
        const uint g = 2u * u + h;
        const uint low = g < 8u ? load_u8(a + kOffScales + g) & 0xFu : load_u8(a + kOffScales + g - 8u) >> 4;
        const uint high = (load_u8(a + kOffScales + 8u + g % 4u) >> (2u * (g / 4u))) & 3u;
        scale[h] = int(low | (high << 4)) - 32;
#endif
    }
#if defined(TYPE_Q2_K)
    dmin = load_f16(a + kOffDmin);
#endif
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
    uint sc, mn;
    k4_scale_min(a + kOffScales, u, sc, mn);
    scale[0] = int(sc);
    scale[1] = int(sc);
    minv[0] = int(mn);
    minv[1] = int(mn);
    dmin = load_f16(a + kOffDmin);
    for (uint i = 0u; i < 8u; ++i) {
        uint q = (load_u32(a + kOffQs + 32u * (u / 2u) + 4u * i) >> (4u * (u & 1u))) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_K)
        q |= ((load_u32(a + kOffQh + 4u * i) >> u) & 0x01010101u) << 4;
#endif
        levels[i] = q;
    }
#elif defined(TYPE_Q6_K)
    const uint quarter = u % 4u;
    const uint ql_addr = a + kOffQl + 64u * (u / 4u) + 32u * (quarter & 1u);
    const uint qh_addr = a + kOffQh + 32u * (u / 4u);
    for (uint i = 0u; i < 8u; ++i) {
        const uint low = (load_u32(ql_addr + 4u * i) >> (quarter >= 2u ? 4u : 0u)) & 0x0F0F0F0Fu;
        const uint high = (load_u32(qh_addr + 4u * i) >> (2u * quarter)) & 0x03030303u;
        levels[i] = sub_bytes(low | (high << 4), 32u);
    }
    for (uint h = 0u; h < 2u; ++h) scale[h] = bitfieldExtract(int(load_u8(a + kOffScales + 2u * u + h)), 0, 8);
#elif defined(TYPE_IQ4_XS)
    const uint low = (load_u8(a + kOffScalesL + u / 2u) >> (4u * (u % 2u))) & 0xFu;
    const uint high = (load_u16(a + kOffScalesH) >> (2u * u)) & 3u;
    scale[0] = int(low | (high << 4)) - 32;
    scale[1] = scale[0];
    for (uint i = 0u; i < 4u; ++i) {
        const uint word = load_u32(a + kOffQs + 16u * u + 4u * i);
        levels[i] = iq4_levels(word & 0x0F0F0F0Fu);
        levels[i + 4u] = iq4_levels((word >> 4) & 0x0F0F0F0Fu);
    }
#elif defined(TYPE_TQ1_0) || defined(TYPE_TQ2_0)
    // Ternary: levels digit - 1 under the one scale d (scale 1 for both halves, no mins).
    scale[0] = 1;
    scale[1] = 1;
    for (uint i = 0u; i < 8u; ++i) {
#if defined(TYPE_TQ1_0)
        uint q = 0u;
        for (uint b = 0u; b < 4u; ++b) q |= tq1_0_digit(a, 32u * u + 4u * i + b) << (8u * b);
#else
        const uint q = (load_u32(a + kOffQs + 32u * (u / 4u) + 4u * i) >> (2u * (u % 4u))) & 0x03030303u;
#endif
        levels[i] = sub_bytes(q, 1u);
    }
#endif
}
#endif
