// Block layouts and dequantization of every weight type the Vulkan matmul and get_rows read,
// one type per compilation: the includer defines exactly one TYPE_<NAME> (-DTYPE_Q4_K, ...).
//
// The weights are bound as 32-bit words (binding 0, `weight_words`) so that no 8- or 16-bit
// storage feature is needed; every field is picked out of the words with shifts. Every block
// of every type but MXFP4 has an even byte size and its 16-bit fields sit at even offsets, so a
// 16-bit load never straddles two words and a 32-bit load at an even address needs at most two;
// MXFP4 (17-byte blocks, no 16-bit fields) reads its bytes with load_u8 and load_u32_any.
// Variants built with USE_STORAGE16 (for devices with storageBuffer16BitAccess) also see binding
// 0 as 16-bit words (`weight_halves`, an alias of the same buffer): the fp16 scales, F16/BF16
// elements and the 32-bit loads at addresses that are not multiples of 4 become 16-bit loads.
// Both read the same bits and convert them with the same unpackHalf2x16, so the two paths give
// bit-identical results (tests/backends/test_vulkan_matmul.cpp runs both).
//
// A row of weights is read in units of 32 consecutive elements (kUnit): a legacy block, or an
// eighth of a K-quant super-block. dequant_unit() writes the 32 floats of one unit with the
// same float operations, in the same order, as quant/ref_*.cpp's to_float (products are
// declared `precise` so the compiler cannot fuse a*b+c into one rounding), so a dequantized
// element is bit-identical to quant::to_float's. The block field offsets below mirror
// quant/blocks.h; tests/backends/test_vulkan_layouts.cpp reads every field through them with
// dequant_layout.comp and compares with the C++ structs, so the two cannot drift.
// ref: quant/blocks.h and quant/ref_*.cpp (bit-exact with ggml/src/ggml-quants.c dequantize_row_*)

layout(binding = 0, std430) readonly buffer WeightWords { uint weight_words[]; };
#if defined(USE_STORAGE16)
#extension GL_EXT_shader_16bit_storage : require
layout(binding = 0, std430) readonly buffer WeightHalves { uint16_t weight_halves[]; };
#endif

const uint kUnit = 32;  // elements dequantized together

uint load_u8(uint addr) { return (weight_words[addr >> 2] >> ((addr & 3u) * 8u)) & 0xFFu; }

// addr must be even.
uint load_u16(uint addr) {
#if defined(USE_STORAGE16)
    return uint(weight_halves[addr >> 1]);
#else
    return (weight_words[addr >> 2] >> ((addr & 2u) * 8u)) & 0xFFFFu;
#endif
}

// Four bytes at an even address, byte 0 in bits 0-7.
uint load_u32(uint addr) {
    const uint i = addr >> 2;
    if ((addr & 2u) == 0u) return weight_words[i];
#if defined(USE_STORAGE16)
    return uint(weight_halves[addr >> 1]) | (uint(weight_halves[(addr >> 1) + 1u]) << 16);
#else
    return (weight_words[i] >> 16) | (weight_words[i + 1u] << 16);
#endif
}

float load_f16(uint addr) { return unpackHalf2x16(load_u16(addr)).x; }

// Four bytes at any address, byte 0 in bits 0-7 (32-bit words only, also with USE_STORAGE16).
uint load_u32_any(uint addr) {
    const uint i = addr >> 2, shift = (addr & 3u) * 8u;
    if (shift == 0u) return weight_words[i];
    return (weight_words[i] >> shift) | (weight_words[i + 1u] << (32u - shift));
}

uint nibble(uint word, uint b, bool high) { return (word >> (8u * b + (high ? 4u : 0u))) & 0xFu; }

// ---- block geometry and field offsets (bytes), as in quant/blocks.h ------------------------

#if defined(TYPE_F32)
const uint kBlockElems = 1, kBlockBytes = 4;
#elif defined(TYPE_F16) || defined(TYPE_BF16)
const uint kBlockElems = 1, kBlockBytes = 2;
#elif defined(TYPE_Q4_0) || defined(TYPE_IQ4_NL)
const uint kBlockElems = 32, kBlockBytes = 18;
const uint kOffD = 0, kOffQs = 2;
#elif defined(TYPE_Q4_1)
const uint kBlockElems = 32, kBlockBytes = 20;
const uint kOffD = 0, kOffM = 2, kOffQs = 4;
#elif defined(TYPE_Q5_0)
const uint kBlockElems = 32, kBlockBytes = 22;
const uint kOffD = 0, kOffQh = 2, kOffQs = 6;
#elif defined(TYPE_Q5_1)
const uint kBlockElems = 32, kBlockBytes = 24;
const uint kOffD = 0, kOffM = 2, kOffQh = 4, kOffQs = 8;
#elif defined(TYPE_Q8_0)
const uint kBlockElems = 32, kBlockBytes = 34;
const uint kOffD = 0, kOffQs = 2;
#elif defined(TYPE_Q2_K)
const uint kBlockElems = 256, kBlockBytes = 84;
const uint kOffScales = 0, kOffQs = 16, kOffD = 80, kOffDmin = 82;
#elif defined(TYPE_Q3_K)
const uint kBlockElems = 256, kBlockBytes = 110;
const uint kOffHmask = 0, kOffQs = 32, kOffScales = 96, kOffD = 108;
#elif defined(TYPE_Q4_K)
const uint kBlockElems = 256, kBlockBytes = 144;
const uint kOffD = 0, kOffDmin = 2, kOffScales = 4, kOffQs = 16;
#elif defined(TYPE_Q5_K)
const uint kBlockElems = 256, kBlockBytes = 176;
const uint kOffD = 0, kOffDmin = 2, kOffScales = 4, kOffQh = 16, kOffQs = 48;
#elif defined(TYPE_Q6_K)
const uint kBlockElems = 256, kBlockBytes = 210;
const uint kOffQl = 0, kOffQh = 128, kOffScales = 192, kOffD = 208;
#elif defined(TYPE_IQ4_XS)
const uint kBlockElems = 256, kBlockBytes = 136;
const uint kOffD = 0, kOffScalesH = 2, kOffScalesL = 4, kOffQs = 8;
#elif defined(TYPE_TQ1_0)
const uint kBlockElems = 256, kBlockBytes = 54;
const uint kOffQs = 0, kOffQh = 48, kOffD = 52;
#elif defined(TYPE_TQ2_0)
const uint kBlockElems = 256, kBlockBytes = 66;
const uint kOffQs = 0, kOffD = 64;
#elif defined(TYPE_MXFP4)
const uint kBlockElems = 32, kBlockBytes = 17;
const uint kOffE = 0, kOffQs = 1;
#elif defined(TYPE_IQ2_XXS)
const uint kBlockElems = 256, kBlockBytes = 66;
const uint kOffD = 0, kOffQs = 2;
#elif defined(TYPE_IQ2_XS)
const uint kBlockElems = 256, kBlockBytes = 74;
const uint kOffD = 0, kOffQs = 2, kOffScales = 66;
#elif defined(TYPE_IQ2_S)
const uint kBlockElems = 256, kBlockBytes = 82;
const uint kOffD = 0, kOffQs = 2, kOffSigns = 34, kOffQh = 66, kOffScales = 74;
#elif defined(TYPE_IQ3_XXS)
const uint kBlockElems = 256, kBlockBytes = 98;
const uint kOffD = 0, kOffQs = 2, kOffMeta = 66;  // kOffMeta: the scale and sign words, in qs
#elif defined(TYPE_IQ3_S)
const uint kBlockElems = 256, kBlockBytes = 110;
const uint kOffD = 0, kOffQs = 2, kOffQh = 66, kOffSigns = 74, kOffScales = 106;
#elif defined(TYPE_IQ1_S)
const uint kBlockElems = 256, kBlockBytes = 50;
const uint kOffD = 0, kOffQs = 2, kOffQh = 34;
#elif defined(TYPE_IQ1_M)
const uint kBlockElems = 256, kBlockBytes = 56;
const uint kOffQs = 0, kOffQh = 32, kOffScales = 48;
#else
#error "define one TYPE_<name>"
#endif

#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
#define TYPE_IS_FLOAT 1
#else
// Units of 32 elements per block, and the byte address of the block holding unit `unit`.
const uint kUnitsPerBlock = kBlockElems / kUnit;
uint block_addr(uint row_addr, uint unit) { return row_addr + (unit / kUnitsPerBlock) * kBlockBytes; }
#endif

#if defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS)
// ref: quant/blocks.h kIq4nlValues
const float kIq4nlValues[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                          1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
#endif

#if defined(TYPE_MXFP4)
// ref: quant/blocks.h kMxfp4Values (E2M1 doubled) and e8m0_to_fp32_half (the E8M0 scale halved;
// e = 0 and 1 give float subnormals, which a device that flushes them reads as 0).
const float kMxfp4Values[16] = float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0,
                                          0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
float e8m0_to_fp32_half(uint e) { return uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23); }
#endif

#if defined(TYPE_TQ1_0)
// The stored digit (level + 1: 0, 1, 2) of element e (0..255) of the TQ1_0 block at byte a: trit
// n of byte b is ((b * 3^n) mod 256 * 3) >> 8, with b and n as in quant/blocks.h's BlockTq1_0.
uint tq1_0_digit(uint a, uint e) {
    const uint kPow3[5] = uint[5](1u, 3u, 9u, 27u, 81u);
    uint byte_addr, n;
    if (e < 160u) {
        byte_addr = a + kOffQs + e % 32u;
        n = e / 32u;
    } else if (e < 240u) {
        byte_addr = a + kOffQs + 32u + (e - 160u) % 16u;
        n = (e - 160u) / 16u;
    } else {
        byte_addr = a + kOffQh + (e - 240u) % 4u;
        n = (e - 240u) / 4u;
    }
    return (((load_u8(byte_addr) * kPow3[n]) & 0xFFu) * 3u) >> 8;
}
#endif

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// The 6-bit scale and min of group g (0..7), as quant::k4_scale_min.
void k4_scale_min(uint scales_addr, uint g, out uint sc, out uint m) {
    if (g < 4u) {
        sc = load_u8(scales_addr + g) & 63u;
        m = load_u8(scales_addr + g + 4u) & 63u;
    } else {
        const uint packed = load_u8(scales_addr + g + 4u);
        sc = (packed & 0xFu) | ((load_u8(scales_addr + g - 4u) >> 6) << 4);
        m = (packed >> 4) | ((load_u8(scales_addr + g) >> 6) << 4);
    }
}
#endif

#if defined(TYPE_Q2_K) || defined(TYPE_Q3_K)
// The 2-bit fields of unit u (0..7): byte 32 * (u / 4) + j of qs, bits 2 * (u % 4).
void two_bit_fields(uint qs_addr, uint u, out uint q[32]) {
    const uint shift = 2u * (u % 4u);
    for (uint i = 0u; i < 8u; ++i) {
        const uint word = load_u32(qs_addr + 32u * (u / 4u) + 4u * i);
        for (uint b = 0u; b < 4u; ++b) q[4u * i + b] = (word >> (8u * b + shift)) & 3u;
    }
}
#endif

// The low-bit i-quants' codebooks and unit decoder (TYPE_IQ_LOWBIT).
#include "iq_lowbit.glsl"

// ---- dequantization ----------------------------------------------------------------------

// w[j] = element 32 * unit + j of the row starting at byte row_addr; n_valid (< 32 only in the
// last unit of a float row whose length is not a multiple of 32) limits what is read, and the
// elements past it are 0.
void dequant_unit(uint row_addr, uint unit, uint n_valid, out float w[32]) {
#if defined(TYPE_F32)
    const uint first = (row_addr >> 2) + unit * kUnit;
    for (uint j = 0u; j < kUnit; ++j) w[j] = j < n_valid ? uintBitsToFloat(weight_words[first + j]) : 0.0;
#elif defined(TYPE_F16)
    const uint first = row_addr + 2u * unit * kUnit;
    for (uint j = 0u; j < kUnit; ++j) w[j] = j < n_valid ? load_f16(first + 2u * j) : 0.0;
#elif defined(TYPE_BF16)
    const uint first = row_addr + 2u * unit * kUnit;
    for (uint j = 0u; j < kUnit; ++j) w[j] = j < n_valid ? uintBitsToFloat(load_u16(first + 2u * j) << 16) : 0.0;
#elif defined(TYPE_Q4_0) || defined(TYPE_IQ4_NL)
    // Element j in the low nibble of qs[j], element j + 16 in the high nibble.
    const uint a = block_addr(row_addr, unit);
    const float d = load_f16(a + kOffD);
    for (uint i = 0u; i < 4u; ++i) {
        const uint word = load_u32(a + kOffQs + 4u * i);
        for (uint b = 0u; b < 4u; ++b) {
#if defined(TYPE_Q4_0)
            w[4u * i + b] = float(int(nibble(word, b, false)) - 8) * d;
            w[4u * i + b + 16u] = float(int(nibble(word, b, true)) - 8) * d;
#else
            w[4u * i + b] = d * kIq4nlValues[nibble(word, b, false)];
            w[4u * i + b + 16u] = d * kIq4nlValues[nibble(word, b, true)];
#endif
        }
    }
#elif defined(TYPE_Q4_1)
    const uint a = block_addr(row_addr, unit);
    const float d = load_f16(a + kOffD);
    const float m = load_f16(a + kOffM);
    for (uint i = 0u; i < 4u; ++i) {
        const uint word = load_u32(a + kOffQs + 4u * i);
        for (uint b = 0u; b < 4u; ++b) {
            precise float lo = float(nibble(word, b, false)) * d + m;
            precise float hi = float(nibble(word, b, true)) * d + m;
            w[4u * i + b] = lo;
            w[4u * i + b + 16u] = hi;
        }
    }
#elif defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
    // Bit 4 of element j is bit j of qh.
    const uint a = block_addr(row_addr, unit);
    const float d = load_f16(a + kOffD);
    const uint qh = load_u32(a + kOffQh);
#if defined(TYPE_Q5_1)
    const float m = load_f16(a + kOffM);
#endif
    for (uint i = 0u; i < 4u; ++i) {
        const uint word = load_u32(a + kOffQs + 4u * i);
        for (uint b = 0u; b < 4u; ++b) {
            const uint j = 4u * i + b;
            const uint lo = nibble(word, b, false) | (((qh >> j) & 1u) << 4);
            const uint hi = nibble(word, b, true) | (((qh >> (j + 16u)) & 1u) << 4);
#if defined(TYPE_Q5_0)
            w[j] = float(int(lo) - 16) * d;
            w[j + 16u] = float(int(hi) - 16) * d;
#else
            precise float vlo = float(lo) * d + m;
            precise float vhi = float(hi) * d + m;
            w[j] = vlo;
            w[j + 16u] = vhi;
#endif
        }
    }
#elif defined(TYPE_Q8_0)
    const uint a = block_addr(row_addr, unit);
    const float d = load_f16(a + kOffD);
    for (uint i = 0u; i < 8u; ++i) {
        const int word = int(load_u32(a + kOffQs + 4u * i));
        for (uint b = 0u; b < 4u; ++b) w[4u * i + b] = float(bitfieldExtract(word, int(8u * b), 8)) * d;
    }
#elif defined(TYPE_Q2_K)
    // Groups of 16: element = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4).
    const uint a = block_addr(row_addr, unit);
    const uint u = unit % kUnitsPerBlock;
    const float d = load_f16(a + kOffD);
    const float dmin = load_f16(a + kOffDmin);
    uint q[32];
    two_bit_fields(a + kOffQs, u, q);
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        const uint sc = load_u8(a + kOffScales + 2u * u + half_);
        const float dl = d * float(sc & 0xFu);
        const float ml = dmin * float(sc >> 4);
        for (uint l = 0u; l < 16u; ++l) {
            precise float v = dl * float(q[16u * half_ + l]) - ml;
            w[16u * half_ + l] = v;
        }
    }
#elif defined(TYPE_Q3_K)
    // Groups of 16: element = d * (scale - 32) * (q - 4 * !high_bit); the high bit of element
    // 32 * u + j is bit u of hmask[j].
    const uint a = block_addr(row_addr, unit);
    const uint u = unit % kUnitsPerBlock;
    const float d = load_f16(a + kOffD);
    uint q[32];
    two_bit_fields(a + kOffQs, u, q);
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        const uint g = 2u * u + half_;
        const uint low = g < 8u ? load_u8(a + kOffScales + g) & 0xFu : load_u8(a + kOffScales + g - 8u) >> 4;
        const uint high = (load_u8(a + kOffScales + 8u + g % 4u) >> (2u * (g / 4u))) & 3u;
        const float dl = d * float(int(low | (high << 4)) - 32);
        for (uint l = 0u; l < 16u; ++l) {
            const uint j = 16u * half_ + l;
            const int v = int(q[j]) - (((load_u8(a + kOffHmask + j) >> u) & 1u) != 0u ? 0 : 4);
            w[j] = dl * float(v);
        }
    }
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
    // Group u of 32: element = d * sc * q - dmin * m; the nibbles of units 2i and 2i + 1 share
    // bytes 32 * i .. 32 * i + 31 of qs (low, high). Q5_K's fifth bit is bit u of qh[j].
    const uint a = block_addr(row_addr, unit);
    const uint u = unit % kUnitsPerBlock;
    uint sc, mn;
    k4_scale_min(a + kOffScales, u, sc, mn);
    const float dl = load_f16(a + kOffD) * float(sc);
    const float ml = load_f16(a + kOffDmin) * float(mn);
    for (uint i = 0u; i < 8u; ++i) {
        const uint word = load_u32(a + kOffQs + 32u * (u / 2u) + 4u * i);
#if defined(TYPE_Q5_K)
        const uint qh = load_u32(a + kOffQh + 4u * i);
#endif
        for (uint b = 0u; b < 4u; ++b) {
            uint q = nibble(word, b, (u & 1u) != 0u);
#if defined(TYPE_Q5_K)
            q |= ((qh >> (8u * b + u)) & 1u) << 4;
#endif
            precise float v = dl * float(q) - ml;
            w[4u * i + b] = v;
        }
    }
#elif defined(TYPE_Q6_K)
    // Groups of 16: element = d * scales[g] * (q - 32). In each 128-element half, quarter
    // k = u % 4 takes the low (k < 2) or high nibbles of ql[32 * (k & 1) + j] and bits 2k, 2k + 1
    // of qh[j].
    const uint a = block_addr(row_addr, unit);
    const uint u = unit % kUnitsPerBlock;
    const uint quarter = u % 4u;
    const uint ql_addr = a + kOffQl + 64u * (u / 4u) + 32u * (quarter & 1u);
    const uint qh_addr = a + kOffQh + 32u * (u / 4u);
    const float d = load_f16(a + kOffD);
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        const int sc = bitfieldExtract(int(load_u8(a + kOffScales + 2u * u + half_)), 0, 8);
        const float dl = d * float(sc);
        for (uint i = 0u; i < 4u; ++i) {
            const uint j0 = 16u * half_ + 4u * i;
            const uint lw = load_u32(ql_addr + j0);
            const uint hw = load_u32(qh_addr + j0);
            for (uint b = 0u; b < 4u; ++b) {
                const uint low = nibble(lw, b, quarter >= 2u);
                const uint high = (hw >> (8u * b + 2u * quarter)) & 3u;
                w[j0 + b] = dl * float(int(low | (high << 4)) - 32);
            }
        }
    }
#elif defined(TYPE_IQ4_XS)
    // Group u of 32: element = d * (ls - 32) * kIq4nlValues[q], ls = low nibble u of scales_l
    // and bits 2u, 2u + 1 of scales_h; nibbles as in IQ4_NL, 16 bytes of qs per group.
    const uint a = block_addr(row_addr, unit);
    const uint u = unit % kUnitsPerBlock;
    const uint low = (load_u8(a + kOffScalesL + u / 2u) >> (4u * (u % 2u))) & 0xFu;
    const uint high = (load_u16(a + kOffScalesH) >> (2u * u)) & 3u;
    const float dl = load_f16(a + kOffD) * float(int(low | (high << 4)) - 32);
    for (uint i = 0u; i < 4u; ++i) {
        const uint word = load_u32(a + kOffQs + 16u * u + 4u * i);
        for (uint b = 0u; b < 4u; ++b) {
            w[4u * i + b] = dl * kIq4nlValues[nibble(word, b, false)];
            w[4u * i + b + 16u] = dl * kIq4nlValues[nibble(word, b, true)];
        }
    }
#elif defined(TYPE_TQ1_0)
    const uint a = block_addr(row_addr, unit);
    const uint u = unit % kUnitsPerBlock;
    const float d = load_f16(a + kOffD);
    for (uint j = 0u; j < 32u; ++j) w[j] = d * float(int(tq1_0_digit(a, 32u * u + j)) - 1);
#elif defined(TYPE_TQ2_0)
    // Unit u: bits 2 * (u % 4) of bytes 32 * (u / 4) .. + 31 of qs, level = field - 1.
    const uint a = block_addr(row_addr, unit);
    const uint u = unit % kUnitsPerBlock;
    const float d = load_f16(a + kOffD);
    for (uint i = 0u; i < 8u; ++i) {
        const uint word = load_u32(a + kOffQs + 32u * (u / 4u) + 4u * i);
        for (uint b = 0u; b < 4u; ++b) w[4u * i + b] = d * float(int((word >> (8u * b + 2u * (u % 4u))) & 3u) - 1);
    }
#elif defined(TYPE_MXFP4)
    // Nibbles as in Q4_0; 16 bytes of qs at an address of any parity.
    const uint a = block_addr(row_addr, unit);
    const float d = e8m0_to_fp32_half(load_u8(a + kOffE));
    for (uint i = 0u; i < 4u; ++i) {
        const uint word = load_u32_any(a + kOffQs + 4u * i);
        for (uint b = 0u; b < 4u; ++b) {
            w[4u * i + b] = d * kMxfp4Values[nibble(word, b, false)];
            w[4u * i + b + 16u] = d * kMxfp4Values[nibble(word, b, true)];
        }
    }
#elif defined(TYPE_IQ_LOWBIT)
    iq_dequant_unit(row_addr, unit, w);
#endif
}
