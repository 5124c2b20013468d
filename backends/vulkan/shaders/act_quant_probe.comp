#version 450
// Probe for tests/backends/test_vulkan_layouts.cpp: quantizes x with act_quant.glsl (the
// integer-dot matmuls' activation quantizers) and writes what the test compares with the CPU's
// quantizer and the CPU's divisions. Per block:
// - Q8_0 / Q8_1 (mode 0 / 1, 32 values): the 8 words of levels, the scale word (F16 d; Q8_1: F16
//   s in the high half), the bits of id = 127 / amax and of d = amax / 127: 11 words.
// - Q8_K (mode 2, 256 values): the 64 words of levels, the bits of d and of iscale: 66 words.
//   matmul_q8k.comp finds the first element of largest magnitude in chunks; here one thread
//   scans the block in order, the CPU's way.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

#include "act_quant.glsl"

layout(binding = 0, std430) readonly buffer X { float x[]; };
layout(binding = 1, std430) writeonly buffer Probe { uint probe[]; };

layout(push_constant) uniform Params {
    uint n_blocks;
    uint mode;  // 0: Q8_0, 1: Q8_1, 2: Q8_K
} p;

void main() {
    const uint block = gl_GlobalInvocationID.x;
    if (block >= p.n_blocks) return;
    if (p.mode == 2u) {
        const uint first = block * kQ8KBlock;
        float max_value = 0.0;
        for (uint j = 0u; j < kQ8KBlock; ++j) {
            if (abs(x[first + j]) > abs(max_value)) max_value = x[first + j];
        }
        float iscale, d;
        q8k_scales(max_value, iscale, d);
        for (uint i = 0u; i < kQ8KBlock / 4u; ++i) {
            uint word = 0u;
            for (uint b = 0u; b < 4u; ++b) word |= (uint(q8k_level(iscale, x[first + 4u * i + b])) & 0xFFu) << (8u * b);
            probe[66u * block + i] = word;
        }
        probe[66u * block + 64u] = floatBitsToUint(d);
        probe[66u * block + 65u] = floatBitsToUint(iscale);
        return;
    }
    float v[kQ8Block];
    for (uint j = 0u; j < kQ8Block; ++j) v[j] = x[block * kQ8Block + j];
    uint levels[8];
    uint scales;
    float id, d;
    quantize_q8_block(v, p.mode == 1u, levels, scales, id, d);
    for (uint i = 0u; i < 8u; ++i) probe[11u * block + i] = levels[i];
    probe[11u * block + 8u] = scales;
    probe[11u * block + 9u] = floatBitsToUint(id);
    probe[11u * block + 10u] = floatBitsToUint(d);
}
