// SIMD vec_dot kernels for the CPU backend, picked once per process by CPU feature detection.
//
// Every kernel computes what the scalar reference in quant/ computes (integer dot products
// inside each block, then the block scales) and differs from it only in the order of the float
// additions across blocks. A type without a kernel for the chosen instruction set falls back to
// the next lower one, and finally to the scalar reference, so best_vec_dot never returns a
// function that does less than quant_traits(type)->vec_dot.
//
// The environment variable DESKSIDE_CPU_ISA=scalar|avx2|avx512 forces a level (for tests and
// for comparing kernels); asking for a level the CPU lacks is an error.
#pragma once

#include <string_view>

#include "quant/quant.h"

namespace deskside::backends::cpu {

enum class CpuIsa { Scalar, Avx2, Avx512 };

std::string_view isa_name(CpuIsa isa);

// The best level this CPU supports.
CpuIsa detected_isa();

// The level named by a DESKSIDE_CPU_ISA value ("scalar", "avx2", "avx512"); throws
// std::runtime_error naming the variable when the value is unknown or the CPU lacks that level.
CpuIsa isa_from_setting(std::string_view value);

// The level best_vec_dot uses: DESKSIDE_CPU_ISA when set, else detected_isa(). Resolved on the
// first call; throws as isa_from_setting does.
CpuIsa selected_isa();

// The fastest dot for weights of `weight_type` (activations in quant_traits(weight_type)
// ->vec_dot_type) at selected_isa(), or nullptr for a type quant/ has no traits for.
quant::VecDotFn best_vec_dot(quant::TypeId weight_type);

// The dot used at a given level, with the same fallback chain; does not check that the CPU
// supports `isa` (see cpu_features()).
quant::VecDotFn vec_dot_for(quant::TypeId weight_type, CpuIsa isa);

// Whether `isa` has a kernel of its own for `weight_type` (rather than a fallback).
bool has_kernel(quant::TypeId weight_type, CpuIsa isa);

}  // namespace deskside::backends::cpu
