// AVX2 dots for unquantized rows: F32 . F32, F16 . F16 (converted with F16C) and BF16 . BF16
// (a bfloat16 is the top half of a float). Four independent accumulators hide the FMA latency.
// ref: quant/ref_float.cpp (the scalar references, which accumulate in double)
#include <cmath>

#include "backends/cpu/dot_avx2_common.h"
#include "backends/cpu/dot_isa.h"
#include "quant/float16.h"

namespace deskside::backends::cpu {

using namespace avx2;

namespace {

// Sum of w[i] * a[i], where load8(p, i) widens 8 elements starting at i to floats.
template <typename T, typename Load8, typename Scalar>
float dot_rows(int64_t n, const T* w, const T* a, Load8 load8, Scalar scalar) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_ps(load8(w, i + 8 * k), load8(a, i + 8 * k), acc[k]);
    }
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load8(w, i), load8(a, i), acc[0]);
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    // The tail is one explicit fma per element: `sum += w * a` was contracted or not as the build
    // chose (GCC -O3 vectorized 4 products unfused, -O2 fused each), so its bits were not one thing.
    // The Vulkan and CUDA exact paths fuse every step too.
    for (; i < n; ++i) sum = std::fma(scalar(w[i]), scalar(a[i]), sum);
    return sum;
}

}  // namespace

float vec_dot_f32_avx2(int64_t n, const void* w, const void* a) {
    return dot_rows(
        n, static_cast<const float*>(w), static_cast<const float*>(a),
        [](const float* p, int64_t i) { return _mm256_loadu_ps(p + i); }, [](float v) { return v; });
}

float vec_dot_f16_avx2(int64_t n, const void* w, const void* a) {
    return dot_rows(
        n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a),
        [](const uint16_t* p, int64_t i) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))); },
        [](uint16_t v) { return quant::fp16_to_fp32(v); });
}

float vec_dot_bf16_avx2(int64_t n, const void* w, const void* a) {
    return dot_rows(
        n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a),
        [](const uint16_t* p, int64_t i) {
            const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
            return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
        },
        [](uint16_t v) { return quant::bf16_to_fp32(v); });
}

}  // namespace deskside::backends::cpu
