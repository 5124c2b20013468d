// Helpers shared by vkcore's shaders (elementwise, norm, rope, attention, copy).
//
// Dispatches larger than maxComputeWorkGroupCount.x are laid out in x * y groups
// (VulkanBackend::groups); group_index() undoes that.
uint group_index() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

// v rounded to the nearest F16 value (ties to even), returned as a float. Written out with
// integer operations because packHalf2x16's rounding mode is left to the driver, and the CPU
// backend rounds to nearest even (quant/float16.h). Values beyond F16's range are not expected
// by the callers (|v| < 65504).
float round_to_f16(float v) {
    uint u = floatBitsToUint(v);
    uint sign = u & 0x80000000u;
    uint a = u & 0x7fffffffu;
    if (a < 0x38800000u) {
        // Below 2^-14: F16 subnormals, multiples of 2^-24 (exact scaling by powers of two).
        float q = roundEven(uintBitsToFloat(a) * 16777216.0) / 16777216.0;
        return uintBitsToFloat(sign | floatBitsToUint(q));
    }
    a += 0xfffu + ((a >> 13) & 1u);
    return uintBitsToFloat(sign | (a & 0xffffe000u));
}

// tanh without the overflow of (e^2x - 1) / (e^2x + 1) for large |x|.
float safe_tanh(float x) {
    float t = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - t) / (1.0 + t);
}
