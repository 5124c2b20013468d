#version 450
// Layout probe for tests/backends/test_vulkan_layouts.cpp: reads every field of the second of
// two blocks of TYPE_<NAME> through dequant.glsl's offsets and accessors, and writes the block
// size, the elements per block and each field's first and last element as words. The test
// fills the blocks with random bytes and compares with quant/blocks.h's structs, so a field
// offset or block size that drifts from quant/ fails there.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 1, local_size_y = 1, local_size_z = 1) in;

#define IQ_CODEBOOK_BINDING 2  // declared by iq_lowbit.glsl, never read by this probe
#include "dequant.glsl"

layout(binding = 1, std430) writeonly buffer Probe { uint probe[]; };

uint n_out = 0u;
void put(uint v) { probe[n_out++] = v; }

void main() {
    const uint b = kBlockBytes;  // the second block
    put(kBlockBytes);
    put(kBlockElems);
#if defined(TYPE_Q4_0) || defined(TYPE_IQ4_NL)
    put(load_u16(b + kOffD));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 15u));
#elif defined(TYPE_Q4_1)
    put(load_u16(b + kOffD)); put(load_u16(b + kOffM));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 15u));
#elif defined(TYPE_Q5_0)
    put(load_u16(b + kOffD));
    put(load_u32(b + kOffQh));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 15u));
#elif defined(TYPE_Q5_1)
    put(load_u16(b + kOffD)); put(load_u16(b + kOffM));
    put(load_u32(b + kOffQh));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 15u));
#elif defined(TYPE_Q8_0)
    put(load_u16(b + kOffD));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 31u));
#elif defined(TYPE_Q2_K)
    put(load_u8(b + kOffScales)); put(load_u8(b + kOffScales + 15u));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 63u));
    put(load_u16(b + kOffD)); put(load_u16(b + kOffDmin));
#elif defined(TYPE_Q3_K)
    put(load_u8(b + kOffHmask)); put(load_u8(b + kOffHmask + 31u));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 63u));
    put(load_u8(b + kOffScales)); put(load_u8(b + kOffScales + 11u));
    put(load_u16(b + kOffD));
#elif defined(TYPE_Q4_K)
    put(load_u16(b + kOffD)); put(load_u16(b + kOffDmin));
    put(load_u8(b + kOffScales)); put(load_u8(b + kOffScales + 11u));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 127u));
#elif defined(TYPE_Q5_K)
    put(load_u16(b + kOffD)); put(load_u16(b + kOffDmin));
    put(load_u8(b + kOffScales)); put(load_u8(b + kOffScales + 11u));
    put(load_u8(b + kOffQh)); put(load_u8(b + kOffQh + 31u));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 127u));
#elif defined(TYPE_Q6_K)
    put(load_u8(b + kOffQl)); put(load_u8(b + kOffQl + 127u));
    put(load_u8(b + kOffQh)); put(load_u8(b + kOffQh + 63u));
    put(load_u8(b + kOffScales)); put(load_u8(b + kOffScales + 15u));
    put(load_u16(b + kOffD));
#elif defined(TYPE_IQ4_XS)
    put(load_u16(b + kOffD)); put(load_u16(b + kOffScalesH));
    put(load_u8(b + kOffScalesL)); put(load_u8(b + kOffScalesL + 3u));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 127u));
#elif defined(TYPE_TQ1_0)
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 47u));
    put(load_u8(b + kOffQh)); put(load_u8(b + kOffQh + 3u));
    put(load_u16(b + kOffD));
#elif defined(TYPE_TQ2_0)
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 63u));
    put(load_u16(b + kOffD));
#elif defined(TYPE_MXFP4)
    // The second block starts at an odd address: qs[3..6] is a word read across two.
    put(load_u8(b + kOffE));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 15u));
    put(load_u32_any(b + kOffQs + 3u));
#elif defined(TYPE_IQ2_XXS)
    put(load_u16(b + kOffD));
    put(load_u16(b + kOffQs)); put(load_u16(b + kOffQs + 62u));
#elif defined(TYPE_IQ2_XS)
    put(load_u16(b + kOffD));
    put(load_u16(b + kOffQs)); put(load_u16(b + kOffQs + 62u));
    put(load_u8(b + kOffScales)); put(load_u8(b + kOffScales + 7u));
#elif defined(TYPE_IQ2_S)
    put(load_u16(b + kOffD));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 31u));
    put(load_u8(b + kOffSigns)); put(load_u8(b + kOffSigns + 31u));
    put(load_u8(b + kOffQh)); put(load_u8(b + kOffQh + 7u));
    put(load_u8(b + kOffScales)); put(load_u8(b + kOffScales + 7u));
#elif defined(TYPE_IQ3_XXS)
    put(load_u16(b + kOffD));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 63u));
    put(load_u32(b + kOffMeta)); put(load_u32(b + kOffMeta + 28u));
#elif defined(TYPE_IQ3_S)
    put(load_u16(b + kOffD));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 63u));
    put(load_u8(b + kOffQh)); put(load_u8(b + kOffQh + 7u));
    put(load_u8(b + kOffSigns)); put(load_u8(b + kOffSigns + 31u));
    put(load_u8(b + kOffScales)); put(load_u8(b + kOffScales + 3u));
#elif defined(TYPE_IQ1_S)
    put(load_u16(b + kOffD));
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 31u));
    put(load_u16(b + kOffQh)); put(load_u16(b + kOffQh + 14u));
#elif defined(TYPE_IQ1_M)
    put(load_u8(b + kOffQs)); put(load_u8(b + kOffQs + 31u));
    put(load_u8(b + kOffQh)); put(load_u8(b + kOffQh + 15u));
    put(load_u16(b + kOffScales)); put(load_u16(b + kOffScales + 6u));
#endif
}
