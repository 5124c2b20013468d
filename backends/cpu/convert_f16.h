// F32 -> F16 rows for set_rows (every KV-cache write of an F16 cache): F16C where the CPU has it,
// otherwise quant::ref::from_float_f16. Both give the same bits (round to nearest even, NaN to the
// quiet NaN 0x7E00 with its sign), so a cache reads the same whichever wrote it.
#pragma once

#include <cstdint>

#include "backends/cpu/dot_kernels.h"
#include "quant/quant.h"

namespace deskside::backends::cpu {

// The AVX2/F16C converter (convert_f16_avx2.cpp); call only where cpu_features() has it.
void from_float_f16_avx2(const float* src, void* dst, int64_t n);

// The F32 -> F16 row converter of an instruction-set level: F16C from CpuIsa::Avx2 up, the
// portable one at CpuIsa::Scalar. The default is the level the process runs (selected_isa(),
// which DESKSIDE_CPU_ISA pins).
quant::FromFloatFn best_f16_converter(CpuIsa isa = selected_isa());

}  // namespace deskside::backends::cpu
