// AMX tiles on the CPU: the first use of them, one INT8 tile product. It is what the test of AMX
// detection runs where cpu_features().has_amx_int8() (CPUID, XCR0 and the kernel's permission),
// so that a detection that says yes is known to execute without a fault. The prompt GEMM on
// tiles (issue #21) is built on the same configuration.
#pragma once

#include <cstdint>

namespace deskside::backends::cpu {

// Tile shape of the product: 16 rows of 64 bytes, AMX's largest tile.
inline constexpr int kAmxRows = 16;
inline constexpr int kAmxK = 64;

// c[16][16] += a[16][64] . b[64][16] over signed bytes with int32 sums (TDPBSSD). b_vnni holds
// b in the layout the instruction reads: row k / 4, bytes 4 n .. 4 n + 3 = b[k .. k + 3][n].
// Call only where cpu_features().has_amx_int8().
void amx_int8_tile_product(const int8_t* a, const int8_t* b_vnni, int32_t* c);

}  // namespace deskside::backends::cpu
