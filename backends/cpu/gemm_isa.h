// The tiled gemm kernels and SIMD activation quantizers, one declaration per (type, instruction
// set). Private to backends/cpu: callers go through best_gemm / best_activation_quantizer
// (gemm_kernels.h), which only hand out what the running CPU supports. The gemm kernels have
// the signature of GemmFn, the quantizers that of quant::FromFloatFn.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deskside::backends::cpu {

// gemm_legacy_avx2.cpp: twins of the dot_legacy_avx2.cpp kernels.
void gemm_q4_0_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys);
void gemm_q5_0_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys);
void gemm_q8_0_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys);
void gemm_iq4_nl_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                      float* y, size_t ys);
void gemm_mxfp4_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                     float* y, size_t ys);  // twin: vec_dot_mxfp4_avx2 (dot_tq_mxfp4_avx2.cpp)

// gemm_kquant_avx2.cpp: twins of the dot_kquant_avx2.cpp kernels.
void gemm_q4_k_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys);
void gemm_q6_k_avx2(int64_t k, const uint8_t* w, size_t ws, int64_t nr, const uint8_t* a, size_t as, int64_t nc,
                    float* y, size_t ys);

// gemm_quantize_avx2.cpp: the activation quantizers of quant/activation_quant.h, vectorized.
void quantize_q8_0_avx2(const float* x, void* dst, int64_t n);
void quantize_q8_1_avx2(const float* x, void* dst, int64_t n);
void quantize_q8_k_avx2(const float* x, void* dst, int64_t n);

}  // namespace deskside::backends::cpu
