// The steps the reference quantizers (ref_*.cpp) and the importance-weighted ones
// (quantize_weighted.cpp) share once a block's scales are chosen: packing levels into a block's
// bytes, and for the K-quants requantizing every element against the scales as stored. The two
// differ only in how they search the scales, so these are written once, beside the reference
// quantizer of each format, and the weighted quantizers call them.
// Private to quant/. ref: ggml/src/ggml-quants.c (the tails of quantize_row_*_ref / _impl)
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace deskside::quant::ref {

// 32-element blocks (ref_legacy.cpp): levels[j] in the low nibble of byte j, levels[j + 16] in the
// high one; and bit 4 of each level, level j at bit j.
void pack_nibbles(const uint8_t* levels, uint8_t* qs);
uint32_t high_bits(const uint8_t* levels);

// Q2_K (ref_q2_q3_k.cpp): with y's scales, d and dmin set, requantizes each group whose scale is
// non-zero into levels[0..255] (in [0, 3]; other groups keep theirs) and packs them into y.qs.
void finish_q2_k(const float* x, uint8_t* levels, BlockQ2_K& y);
// Q3_K: the 16 6-bit group scales, biased by 32 (0..63), packed into 12 bytes.
void pack_q3_k_scales(const int8_t* biased, uint8_t* scales);
// Q3_K: with y's scales and d set, requantizes as finish_q2_k (levels biased by 4, in [0, 7]) and
// packs them into y.hmask and y.qs.
void finish_q3_k(const float* x, int8_t* levels, BlockQ3_K& y);

// Q4_K / Q5_K (ref_q4_q5_k.cpp): the 8 6-bit scales and mins packed into 12 bytes.
void pack_k4_scales(const uint8_t* ls, const uint8_t* lm, uint8_t* scales);
// With y's scales, d and dmin set: requantizes each group whose scale is non-zero into levels (in
// [0, 15] / [0, 31]) and packs them into y.qs (and y.qh).
void finish_q4_k(const float* x, uint8_t* levels, BlockQ4_K& y);
void finish_q5_k(const float* x, uint8_t* levels, BlockQ5_K& y);

// Q6_K (ref_q6_q8_k.cpp): with y's scales and d set, requantizes each group whose scale is
// non-zero into levels (biased by 32, in [0, 63]) and packs them into y.ql and y.qh.
void finish_q6_k(const float* x, int8_t* levels, BlockQ6_K& y);
// Q6_K's whole quantizer, since only its group search sees the weights: n floats (one row when
// weighted) searched with `weights` (n values; nullptr: x^2, the reference quantizer).
void quantize_q6_k(const float* src, void* dst, int64_t n, const float* weights);

}  // namespace deskside::quant::ref
