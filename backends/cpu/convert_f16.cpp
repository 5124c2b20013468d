#include "backends/cpu/convert_f16.h"

#include "backends/cpu/cpu_features.h"
#include "quant/reference.h"

namespace deskside::backends::cpu {

quant::FromFloatFn best_f16_converter() {
    return cpu_features().has_avx2_kernels() ? from_float_f16_avx2 : quant::ref::from_float_f16;
}

}  // namespace deskside::backends::cpu
