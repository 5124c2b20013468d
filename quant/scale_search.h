// Scale and level searches shared by the K-quant reference quantizers.
//
// Given a group of n floats, each search picks a scale (and for the asymmetric formats a min)
// and the integer level of every element. These are the searches llama.cpp's reference
// quantizers use; they are reproduced operation for operation (including the magic-number
// rounding of nearest_int and the order of every float sum) because a difference in the last
// bit of a scale can move an element to another level and break byte equality with
// llama-quantize's files.
// ref: ggml/src/ggml-quants.c (nearest_int, make_qx_quants, make_q3_quants, make_qkx2_quants)
#pragma once

#include <cstdint>
#include <cstring>

namespace deskside::quant {

// Round to nearest, ties to even, for |x| < 2^22, by adding 1.5 * 2^23 so the FPU rounds in
// the mantissa. Matches llama.cpp's nearest_int bit for bit, including for inputs it would not
// represent exactly.
inline int nearest_int(float x) {
    const float shifted = x + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &shifted, sizeof(bits));
    return (bits & 0x007FFFFF) - 0x00400000;
}

// Symmetric levels in [0, 2*nmax) (level - nmax is the signed value) minimizing the squared
// error weighted by x^2, trying 19 scales around nmax/max. Returns the scale (0 for an all-zero
// group). Used by Q6_K (n = 16, nmax = 32).
float search_symmetric_x2(int n, int nmax, const float* x, int8_t* levels);

// As search_symmetric_x2 but refined element by element (up to 5 passes); levels in [0, 2*nmax).
// Used by Q3_K (n = 16, nmax = 4).
float search_symmetric_refined(int n, int nmax, const float* x, int8_t* levels);

// Asymmetric levels in [0, nmax] with x ~ scale * level - min, minimizing the weighted error
// (squared, or absolute when use_mad) over nstep+1 candidate scales. Writes min (>= 0, to be
// subtracted) and returns the scale. Used by Q2_K, Q4_K and Q5_K.
float search_asymmetric(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float* min,
                        float rmin, float rdelta, int nstep, bool use_mad);

}  // namespace deskside::quant
