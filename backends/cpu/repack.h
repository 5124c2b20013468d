// Row-interleaved ("x8") weight layouts for the CPU backend's Q4_0, Q8_0, Q4_K and Q6_K matmuls.
//
// Why: a matmul that keeps 8 output rows in the 8 float lanes of one AVX2 vector needs the 8
// rows' blocks side by side. In the GGUF layout those are 8 streams a row apart, which the
// hardware prefetcher follows badly from DRAM (docs/PERFORMANCE.md, session 3); interleaved at
// load, the 8 rows are one sequential stream, decoding reads weights at full DRAM speed, and a
// prompt tile decodes each weight block once for 8 rows. The idea is llama.cpp's ("Q4_0x8",
// "Q4_Kx8"); the byte layouts below are ours.
//
// A matrix of ne1 rows is stored in the same number of bytes as in GGUF. Rows [0, 8 * (ne1 / 8))
// form groups of 8 consecutive rows; group g starts at byte g * 8 * row_bytes and holds, for each
// block b of the row in order, the 8 rows' block b (a "group block", 8 blocks' bytes). The last
// ne1 % 8 rows stay in the plain layout at their usual offsets, and every op reads them as before.
//
// Q4_0x8 group block (144 bytes):  [0, 16)   d of rows 0..7 (fp16)
//                                  [16, 144) 4 chunks of 32 bytes; in chunk t, bytes 4r..4r+3
//                                            are row r's qs[4t..4t+3]
// Q8_0x8 group block (272 bytes):  [0, 16)   d of rows 0..7 (fp16)
//                                  [16, 272) 8 chunks of 32 bytes; in chunk t, bytes 4r..4r+3
//                                            are row r's qs[4t..4t+3]
// Q4_Kx8 group block (1152 bytes): [0, 16)   d of rows 0..7 (fp16)
//                                  [16, 32)  dmin of rows 0..7 (fp16)
//                                  [32, 80)  the 64 6-bit scales, value i = group s, row r at
//                                            i = 8s + r: byte i (i < 32) holds value i's low 4
//                                            bits and value i + 32's in its high nibble; byte
//                                            32 + j (j < 16) holds bits 4-5 of value j + 16q in
//                                            its bits 2q..2q+1
//                                  [80, 128) the 64 mins, encoded the same way
//                                  [128, 1152) 32 quant chunks of 32 bytes, chunk 8j + t for
//                                            64-element part j and t < 8: bytes 4r..4r+3 are
//                                            row r's qs[32j + 4t .. 32j + 4t + 3]
// Q6_Kx8 group block (1680 bytes): [0, 16)   d of rows 0..7 (fp16)
//                                  [16, 144) the int8 group scales, byte 8g + r = row r's
//                                            scales[g] (group g of 16 elements)
//                                  [144, 1680) 4 parts of 384 bytes, part j (elements 64j..64j+63)
//                                            at 144 + 384j: 4 high-bit chunks, then 8 low-nibble
//                                            chunks (one ascending stream for the kernel)
//                                    high chunk u < 4: bits 2s..2s+1 of byte 4r + i (i < 4) are
//                                            bits 4-5 of row r's element 64j + 16s + 4u + i
//                                    low chunk t < 8: byte 4r + i holds, in its low nibble, the
//                                            low 4 bits of row r's element 64j + 4t + i and, in
//                                            its high nibble, those of element 64j + 32 + 4t + i
//                                  (element values are the stored levels 0..63, value + 32);
//                                  low chunk t's high bits are in high chunk t % 4 at s = t / 4
//                                  (low nibbles) and s = 2 + t / 4 (high nibbles)
// With 4 bytes of each row side by side, one broadcast of 4 activation bytes meets all 8 rows,
// and the integer sums land in lane r for row r without any horizontal reduction.
//
// The float order per output row r (what a shader must repeat to get the same bits; fp32
// products rounded before use, fma where written, no reassociation):
//   Q4_0x8, Q4_Kx8: one FMA chain over blocks in block order, fed by exact integer block sums:
//     acc_r = fma(d_w[r] * d_a, float(isum_r(b)), acc_r), from 0, where isum_r(b) is
//     Q4_0x8: sum over the block of (q - 8) * a  (vs Q8_0, d_a its fp16 d);
//     Q4_Kx8: sum_g sc[g] * sum_{e in g} q * a  (vs Q8_K, d_a its float d), and a second chain
//       m_r = fma(dmin[r] * d_a, float(sum_g min[g] * bsums of g), m_r); the output is acc_r - m_r.
//   Q8_0x8, Q6_Kx8: the plain single-row kernel's order (vec_dot_q8_0_avx2, vec_dot_q6_k_avx2),
//     so these layouts change no result: 8 chains per row, chain l = fma(d_w[r] * d_a,
//     float(isum_rl(b)), chain l) over blocks, where isum_rl(b) sums the block's products of
//     elements 4l..4l+3 of each 32-element piece (Q6_K: values level - 32, times their group
//     scale); the output is ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace deskside::backends::cpu {

enum class WeightLayout { Plain, Q4_0x8, Q8_0x8, Q4_Kx8, Q6_Kx8 };

inline constexpr int64_t kRepackRows = 8;

// Rows held interleaved in a matrix of ne1 rows; the rest are plain.
inline int64_t interleaved_rows(int64_t ne1) { return ne1 / kRepackRows * kRepackRows; }

// The layout CpuBackend stores a [ne0, ne1] weight matrix of `type` in: an x8 layout when the
// type has one, there is at least one group of 8 rows, the selected instruction set is AVX2 or
// above (the kernels are AVX2; the scalar level keeps the plain layout) and DESKSIDE_CPU_REPACK
// is not "0" (for A/B measurements; any other value than 0 or 1 throws, naming the variable).
WeightLayout weight_layout_for(quant::TypeId type, int64_t ne1);

// The layout `type` would use, ignoring the instruction set and the environment (for tests).
WeightLayout x8_layout_of(quant::TypeId type);

// Writes the [ne0, ne1] matrix `src` (GGUF layout, contiguous rows) to dst in `layout` (the same
// number of bytes). ne0 must be a multiple of the type's block size.
void repack_matrix(WeightLayout layout, const uint8_t* src, int64_t ne0, int64_t ne1, uint8_t* dst);

// Row `row` of a matrix stored in `layout`, written to out in the GGUF layout (row_bytes bytes).
void unpack_row(WeightLayout layout, const uint8_t* data, int64_t ne0, int64_t ne1, int64_t row, uint8_t* out);

// The x8 kernel: for groups g < n_groups of w (consecutive group-rows, 8 * row_bytes apart) and
// activation rows c < n_cols, y[c * y_stride + 8 g + r] = dot(weight row 8 g + r, activation row
// c). Activation rows are in the weight type's vec_dot_type, a_stride bytes apart. a_sums: for
// Q4_0x8, the integer sum of each Q8_0 activation block, sums_stride apart per row (the others
// ignore it; the K-quant kernels read Q8_K's bsums). Each output is summed in its layout's order
// above, fed by exact integer sums, whatever n_cols is: an output computed with n_cols = 1
// (decode) equals the same output inside a batch bit for bit. prefetch_groups (>= n_groups): the
// groups readable from w on; while computing group g the kernel prefetches group g + 1 if it is
// below that, so a caller whose next call continues with the following rows (a thread streaming
// its share of a decode matvec) keeps the stream going across calls.
using RepackedGemmFn = void (*)(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a, size_t a_stride,
                                const int16_t* a_sums, size_t sums_stride, int64_t n_cols, float* y, size_t y_stride);

// The kernel for `layout` (AVX2; callers check the CPU supports it), nullptr for Plain.
RepackedGemmFn repacked_gemm(WeightLayout layout);

// Whether the kernel of `layout` needs the Q8_0 block sums (a_sums).
inline bool needs_block_sums(WeightLayout layout) { return layout == WeightLayout::Q4_0x8; }

// gemm_repack_avx2.cpp
void gemm_q4_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a,
                      size_t a_stride, const int16_t* a_sums, size_t sums_stride, int64_t n_cols, float* y, size_t y_stride);
void gemm_q8_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a,
                      size_t a_stride, const int16_t* a_sums, size_t sums_stride, int64_t n_cols, float* y, size_t y_stride);
void gemm_q4_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a,
                      size_t a_stride, const int16_t* a_sums, size_t sums_stride, int64_t n_cols, float* y, size_t y_stride);
void gemm_q6_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, int64_t prefetch_groups, const uint8_t* a,
                      size_t a_stride, const int16_t* a_sums, size_t sums_stride, int64_t n_cols, float* y, size_t y_stride);

}  // namespace deskside::backends::cpu
