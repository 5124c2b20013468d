// The low-bit i-quants (TYPE_IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) for
// dequant.glsl (which includes this after its loaders and block geometry) and matmul_q8k.comp:
// a 32-element unit is 32 signed levels (codebook magnitudes with their signs, or IQ1's
// 8 * grid +- 1) and an integer scale per 16-element half, and
//     element j = (d * scale[j / 16]) * kIqDotScale * level[j]
// with the float operations of quant/ref_iq_lowbit.cpp (bit-identical to ggml's dequantizer; see
// quant/iq_lowbit.h for why this is ggml's formula). weight_levels_k (matmul_q8k.comp's decoder,
// the other types' in weight_levels.glsl) hands the same levels and scales to the integer dot,
// whose sum matmul_q8k.comp multiplies by kIqDotScale last, as the CPU backend does.
//
// The codebook is a storage buffer at binding IQ_CODEBOOK_BINDING (the includer's next free one),
// uploaded once per device by vk_iq_codebook.cpp from quant/iq_grids.h: the grid's entries as
// words (a 64-bit entry i is words 2i, elements 0-3, and 2i + 1), then kIqSigns packed four per
// word. (As constant arrays in the shader, lavapipe took minutes to compile IQ1's 2048 entries and
// copied the table per invocation.)
// ref: quant/iq_lowbit.h (iq_group per type, the same fields), quant/blocks.h (BlockIq*)

#if defined(TYPE_IQ2_XXS) || defined(TYPE_IQ2_XS) || defined(TYPE_IQ2_S) || defined(TYPE_IQ3_XXS) || \
    defined(TYPE_IQ3_S) || defined(TYPE_IQ1_S) || defined(TYPE_IQ1_M)
#define TYPE_IQ_LOWBIT 1

#if !defined(IQ_CODEBOOK_BINDING)
#error "define IQ_CODEBOOK_BINDING, the binding of the i-quant codebook"
#endif
layout(binding = IQ_CODEBOOK_BINDING, std430) readonly buffer IqCodebook { uint iq_codebook[]; };

// Words of the grid before the sign table (vk_iq_codebook.cpp's layout).
#if defined(TYPE_IQ2_XXS) || defined(TYPE_IQ3_S)
const uint kIqGridWords = 512;
#elif defined(TYPE_IQ2_XS)
const uint kIqGridWords = 1024;
#elif defined(TYPE_IQ2_S)
const uint kIqGridWords = 2048;
#elif defined(TYPE_IQ3_XXS)
const uint kIqGridWords = 256;
#else
const uint kIqGridWords = 4096;  // IQ1_S, IQ1_M
#endif

#if defined(TYPE_IQ3_XXS)
const float kIqDotScale = 0.25;
#elif defined(TYPE_IQ3_S)
const float kIqDotScale = 1.0;
#else
const float kIqDotScale = 0.125;
#endif

// The block's fp16 scale d; IQ1_M spreads its 16 bits over the top nibbles of its 4 scale words.
float iq_d(uint a) {
#if defined(TYPE_IQ1_M)
    const uint bits = (load_u16(a + kOffScales) >> 12) | ((load_u16(a + kOffScales + 2u) >> 8) & 0xF0u) |
                      ((load_u16(a + kOffScales + 4u) >> 4) & 0xF00u) | (load_u16(a + kOffScales + 6u) & 0xF000u);
    return unpackHalf2x16(bits).x;
#else
    return load_f16(a + kOffD);
#endif
}

#if defined(TYPE_IQ2_XXS) || defined(TYPE_IQ2_XS) || defined(TYPE_IQ3_XXS)
// The 8-bit sign mask of a 7-bit sign index.
uint sign_mask(uint index) { return (iq_codebook[kIqGridWords + (index >> 2)] >> (8u * (index & 3u))) & 0xFFu; }
#endif

// Four magnitudes (a byte each) negated where bit b of `signs` is set, as signed bytes.
uint with_signs(uint mags, uint signs) {
    uint word = 0u;
    for (uint b = 0u; b < 4u; ++b) {
        const uint m = (mags >> (8u * b)) & 0xFFu;
        word |= ((((signs >> b) & 1u) != 0u ? 0u - m : m) & 0xFFu) << (8u * b);
    }
    return word;
}

// IQ1: four grid bytes (-1, 0, 1) as the levels 8 * grid + delta (delta -1 or +1).
uint iq1_levels(uint grid, int delta) {
    uint word = 0u;
    for (uint b = 0u; b < 4u; ++b) {
        const int level = 8 * bitfieldExtract(int(grid), int(8u * b), 8) + delta;
        word |= (uint(level) & 0xFFu) << (8u * b);
    }
    return word;
}

// Unit u (0..7) of the block at byte a: levels[i] = elements 4i .. 4i + 3 as signed bytes, and
// the scale of each half. Field positions as quant/iq_lowbit.h's iq_group.
void iq_unit(uint a, uint u, out uint levels[8], out int scale[2]) {
#if defined(TYPE_IQ2_XXS)
    const uint grids = load_u32(a + kOffQs + 8u * u), meta = load_u32(a + kOffQs + 8u * u + 4u);
    for (uint r = 0u; r < 4u; ++r) {
        const uint e = 2u * ((grids >> (8u * r)) & 0xFFu), s = sign_mask((meta >> (7u * r)) & 127u);
        levels[2u * r] = with_signs(iq_codebook[e], s);
        levels[2u * r + 1u] = with_signs(iq_codebook[e + 1u], s >> 4);
    }
    scale[0] = 2 * int(meta >> 28) + 1;
    scale[1] = scale[0];
#elif defined(TYPE_IQ2_XS)
    for (uint r = 0u; r < 4u; ++r) {
        const uint q = load_u16(a + kOffQs + 8u * u + 2u * r);
        const uint e = 2u * (q & 511u), s = sign_mask(q >> 9);
        levels[2u * r] = with_signs(iq_codebook[e], s);
        levels[2u * r + 1u] = with_signs(iq_codebook[e + 1u], s >> 4);
    }
    const uint sc = load_u8(a + kOffScales + u);
    scale[0] = 2 * int(sc & 0xFu) + 1;
    scale[1] = 2 * int(sc >> 4) + 1;
#elif defined(TYPE_IQ2_S)
    const uint qh = load_u8(a + kOffQh + u);
    for (uint r = 0u; r < 4u; ++r) {
        const uint e = 2u * (load_u8(a + kOffQs + 4u * u + r) | (((qh >> (2u * r)) & 3u) << 8));
        const uint s = load_u8(a + kOffSigns + 4u * u + r);
        levels[2u * r] = with_signs(iq_codebook[e], s);
        levels[2u * r + 1u] = with_signs(iq_codebook[e + 1u], s >> 4);
    }
    const uint sc = load_u8(a + kOffScales + u);
    scale[0] = 2 * int(sc & 0xFu) + 1;
    scale[1] = 2 * int(sc >> 4) + 1;
#elif defined(TYPE_IQ3_XXS)
    const uint meta = load_u32(a + kOffMeta + 4u * u);
    for (uint r = 0u; r < 4u; ++r) {
        const uint s = sign_mask((meta >> (7u * r)) & 127u);
        levels[2u * r] = with_signs(iq_codebook[load_u8(a + kOffQs + 8u * u + 2u * r)], s);
        levels[2u * r + 1u] = with_signs(iq_codebook[load_u8(a + kOffQs + 8u * u + 2u * r + 1u)], s >> 4);
    }
    scale[0] = 2 * int(meta >> 28) + 1;
    scale[1] = scale[0];
#elif defined(TYPE_IQ3_S)
    const uint qh = load_u8(a + kOffQh + u), signs = load_u32(a + kOffSigns + 4u * u);
    for (uint k = 0u; k < 8u; ++k) {
        const uint e = load_u8(a + kOffQs + 8u * u + k) | (((qh >> k) & 1u) << 8);
        levels[k] = with_signs(iq_codebook[e], signs >> (4u * k));
    }
    scale[0] = 2 * int((load_u8(a + kOffScales + u / 2u) >> (4u * (u % 2u))) & 0xFu) + 1;
    scale[1] = scale[0];
#elif defined(TYPE_IQ1_S)
    const uint qh = load_u16(a + kOffQh + 2u * u);
    const int delta = (qh & 0x8000u) != 0u ? -1 : 1;
    for (uint r = 0u; r < 4u; ++r) {
        const uint e = 2u * (load_u8(a + kOffQs + 4u * u + r) | (((qh >> (3u * r)) & 7u) << 8));
        levels[2u * r] = iq1_levels(iq_codebook[e], delta);
        levels[2u * r + 1u] = iq1_levels(iq_codebook[e + 1u], delta);
    }
    scale[0] = 2 * int((qh >> 12) & 7u) + 1;
    scale[1] = scale[0];
#elif defined(TYPE_IQ1_M)
    for (uint r = 0u; r < 4u; ++r) {
        const uint qh = load_u8(a + kOffQh + 2u * u + r / 2u) >> (4u * (r % 2u));
        const uint e = 2u * (load_u8(a + kOffQs + 4u * u + r) | ((qh & 7u) << 8));
        const int delta = (qh & 8u) != 0u ? -1 : 1;
        levels[2u * r] = iq1_levels(iq_codebook[e], delta);
        levels[2u * r + 1u] = iq1_levels(iq_codebook[e + 1u], delta);
    }
    const uint sc = load_u16(a + kOffScales + 2u * (u / 2u)), shift = 6u * (u % 2u);
    scale[0] = 2 * int((sc >> shift) & 7u) + 1;
    scale[1] = 2 * int((sc >> (shift + 3u)) & 7u) + 1;
#endif
}

// The 32 values of unit `unit` of the row at byte row_addr (dequant_unit's branch for these types).
void iq_dequant_unit(uint row_addr, uint unit, out float w[32]) {
    const uint a = block_addr(row_addr, unit);
    uint levels[8];
    int scale[2];
    iq_unit(a, unit % kUnitsPerBlock, levels, scale);
    const float d = iq_d(a);
    for (uint h = 0u; h < 2u; ++h) {
        precise float dl = d * float(scale[h]);
        precise float dls = dl * kIqDotScale;
        for (uint i = 4u * h; i < 4u * h + 4u; ++i) {
            for (uint b = 0u; b < 4u; ++b) {
                precise float v = dls * float(bitfieldExtract(int(levels[i]), int(8u * b), 8));
                w[4u * i + b] = v;
            }
        }
    }
}

// matmul_q8k.comp's decoder (weight_levels.glsl has the other types'): no mins.
void weight_levels_k(uint row_addr, uint unit, out uint levels[8], out int scale[2], out int minv[2], out float d,
                     out float dmin) {
    const uint a = block_addr(row_addr, unit);
    iq_unit(a, unit % kUnitsPerBlock, levels, scale);
    d = iq_d(a);
    dmin = 0.0;
    minv[0] = 0;
    minv[1] = 0;
}

#endif
