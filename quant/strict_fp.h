// Include first in a file whose float arithmetic must round exactly like llama.cpp's reference
// quantizers: it stops the compiler from fusing a*b+c into one FMA (which rounds once instead of
// twice). llama.cpp's reference functions are built for baseline x86-64, which has no FMA, so
// they never fuse; without this, a -march=native build of deskside would fuse and drift from
// llama-quantize's bytes.
#pragma once

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
