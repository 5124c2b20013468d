// Scale and level searches shared by the K-quant reference quantizers.
//
// Given a group of n floats, each search picks a scale (and for the asymmetric formats a min)
// and the integer level of every element. These are the searches llama.cpp's reference
// quantizers use; they are reproduced operation for operation (including the magic-number
// rounding of nearest_int and the order of every float sum) because a difference in the last
// bit of a scale can move an element to another level and break byte equality with
// llama-quantize's files.
// The importance-weighted quantizers (quant/quantize_weighted.cpp) run the same searches with the
// caller's weights, plus one of their own for the super-block scales (search_unsigned_refined).
// ref: ggml/src/ggml-quants.c (nearest_int, make_qx_quants, make_q3_quants, make_qkx2_quants,
//      make_qkx3_quants, make_qp_quants)
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
// error weighted by `weights` (nullptr: by x^2), trying 19 scales around nmax/max. Returns the
// scale (0 for an all-zero group). Used by Q6_K (n = 16, nmax = 32) and, with importance weights,
// by Q3_K, Q4_0, Q5_0 and Q6_K.
float search_symmetric(int n, int nmax, const float* x, const float* weights, int8_t* levels);

// As search_symmetric (weighted by x^2) but refined element by element (up to 5 passes); levels
// in [0, 2*nmax). Used by Q3_K (n = 16, nmax = 4).
float search_symmetric_refined(int n, int nmax, const float* x, int8_t* levels);

// Asymmetric levels in [0, nmax] with x ~ scale * level - min, minimizing the weighted error
// (squared, or absolute when use_mad) over nstep+1 candidate scales. Writes min (>= 0, to be
// subtracted) and returns the scale. Used by Q2_K, Q4_K and Q5_K, and with importance weights by
// those and Q4_1 / Q5_1 (llama.cpp's make_qkx3_quants is this search when given weights).
float search_asymmetric(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float* min,
                        float rmin, float rdelta, int nstep, bool use_mad);

// Non-negative levels in [0, nmax] for non-negative x (the group scales or mins of a super-block),
// minimizing the weighted squared error: the best of 9 scales around nmax/max, then refined element
// by element (up to 5 passes). Returns the scale (0 when max(x) is below 1e-15).
float search_unsigned_refined(int n, int nmax, const float* x, const float* weights, uint8_t* levels);

}  // namespace deskside::quant
