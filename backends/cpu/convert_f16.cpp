#include "backends/cpu/convert_f16.h"

#include "quant/reference.h"

namespace deskside::backends::cpu {

quant::FromFloatFn best_f16_converter(CpuIsa isa) {
    return isa == CpuIsa::Scalar ? quant::ref::from_float_f16 : from_float_f16_avx2;
}

}  // namespace deskside::backends::cpu
