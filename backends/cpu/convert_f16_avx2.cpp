// F32 -> F16 with F16C, eight values per instruction. vcvtps2ph with an explicit
// round-to-nearest-even immediate rounds normal, subnormal and overflowing values exactly as
// quant::fp32_to_fp16 does (ignoring MXCSR); only NaNs differ (F16C keeps payload bits), so NaN
// lanes are replaced by the sign plus 0x7E00, the scalar conversion's quiet NaN.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/convert_f16.h"
#include "quant/float16.h"

namespace deskside::backends::cpu {

namespace {

inline __m128i f32_to_f16x8(__m256 v) {
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    if (_mm256_testz_ps(nan, nan)) return h;
    // Sign bits (0x8000) of the NaN lanes plus 0x7E00, as 8 x 16 bits.
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i quiet = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x8000)),
                                          _mm256_set1_epi32(0x7E00));
    const __m128i quiet16 = _mm_packus_epi32(_mm256_castsi256_si128(quiet), _mm256_extracti128_si256(quiet, 1));
    const __m256i mask32 = _mm256_castps_si256(nan);
    const __m128i mask16 = _mm_packs_epi32(_mm256_castsi256_si128(mask32), _mm256_extracti128_si256(mask32, 1));
    return _mm_blendv_epi8(h, quiet16, mask16);
}

}  // namespace

void from_float_f16_avx2(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), f32_to_f16x8(_mm256_loadu_ps(src + i)));
    for (; i < n; ++i) {
        const uint16_t h = quant::fp32_to_fp16(src[i]);
        std::memcpy(out + 2 * i, &h, sizeof h);
    }
}

}  // namespace deskside::backends::cpu
