// Which x86 SIMD extensions this CPU and OS let deskside use, read once with CPUID and XGETBV.
//
// An extension counts only when the CPU advertises it (CPUID) and the OS saves its registers on
// context switches (XCR0 via XGETBV): a VM can advertise AVX-512 while its hypervisor does not
// enable the state, and executing it would fault. AMX needs a third yes: Linux keeps its tile
// data state (XTILEDATA, 8 KiB per thread) off until the process asks for it with
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); before that a tile instruction faults even
// where CPUID and XCR0 advertise it. Detection asks once and counts AMX only when the kernel
// grants it (and ARCH_GET_XCOMP_PERM then shows the bit).
// ref: Intel SDM Vol. 2A (CPUID leaf 7), Vol. 1 section 13.3 (XCR0 state components);
//      Linux Documentation/arch/x86/xstate.rst (the arch_prctl permission requests)
#pragma once

namespace deskside::backends::cpu {

struct CpuFeatures {
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512vnni = false;
    bool avx512bf16 = false;
    bool amx_tile = false;  // CPUID and XCR0 (XTILECFG + XTILEDATA) say so
    bool amx_int8 = false;
    bool amx_bf16 = false;
    bool amx_permitted = false;  // the kernel granted XTILEDATA to this process

    // What the *_avx2.cpp kernels need (they are compiled with -mavx2 -mfma -mf16c).
    bool has_avx2_kernels() const { return avx2 && fma && f16c; }
    // What the *_avx512.cpp kernels need (compiled with F, BW, VL, DQ, VNNI and BF16; they only
    // use F, BW, VL and VNNI, so BF16 is not required).
    bool has_avx512_kernels() const { return has_avx2_kernels() && avx512f && avx512bw && avx512vl && avx512vnni; }
    // AMX tiles that this process may execute (the *_amx.cpp code needs TILE and INT8).
    bool has_amx_int8() const { return amx_tile && amx_int8 && amx_permitted; }
    bool has_amx_bf16() const { return amx_tile && amx_bf16 && amx_permitted; }
};

// The features of the CPU this process runs on (detected on first call).
const CpuFeatures& cpu_features();

}  // namespace deskside::backends::cpu
