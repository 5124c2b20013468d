#include "backends/cpu/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace deskside::backends::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)

bool bit(uint32_t reg, int n) {
    return (reg >> n) & 1;
}

// XCR0: which register states the OS saves. Only valid to read when CPUID reports OSXSAVE.
uint64_t read_xcr0() {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<uint64_t>(edx) << 32) | eax;
}

// Asks Linux for the AMX tile data state; true when granted (now or before).
bool request_amx_permission() {
#if defined(__linux__) && defined(__x86_64__)
    constexpr long kArchGetXcompPerm = 0x1022;  // arch/x86/include/uapi/asm/prctl.h
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
    unsigned long permitted = 0;
    if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &permitted) != 0) return false;
    return (permitted >> kXfeatureXtiledata) & 1;
#else
    return false;
#endif
}

CpuFeatures detect() {
    CpuFeatures f;
    uint32_t eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
    const bool osxsave = bit(ecx, 27);
    const bool avx = bit(ecx, 28);
    const bool fma = bit(ecx, 12);
    const bool f16c = bit(ecx, 29);
    if (!osxsave || !avx) return f;
    const uint64_t xcr0 = read_xcr0();
    const bool ymm_state = (xcr0 & 0x6) == 0x6;           // SSE and AVX (YMM upper halves)
    const bool zmm_state = (xcr0 & 0xE0) == 0xE0;         // opmask, ZMM0-15 upper halves, ZMM16-31
    const bool tile_state = (xcr0 & 0x60000) == 0x60000;  // XTILECFG (17) and XTILEDATA (18)
    if (!ymm_state) return f;
    f.fma = fma;
    f.f16c = f16c;
    if (__get_cpuid_max(0, nullptr) < 7) return f;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    const uint32_t max_subleaf = eax;
    f.avx2 = bit(ebx, 5);
    if (zmm_state) {
        f.avx512f = bit(ebx, 16);
        f.avx512bw = bit(ebx, 30);
        f.avx512vl = bit(ebx, 31);
        f.avx512vnni = bit(ecx, 11);
        if (max_subleaf >= 1) {
            uint32_t eax1, ebx1, ecx1, edx1;
            __cpuid_count(7, 1, eax1, ebx1, ecx1, edx1);
            f.avx512bf16 = bit(eax1, 5);
        }
    }
    if (tile_state && bit(edx, 24)) {
        f.amx_tile = true;
        f.amx_int8 = bit(edx, 25);
        f.amx_bf16 = bit(edx, 22);
        f.amx_permitted = request_amx_permission();
    }
    return f;
}

#else

CpuFeatures detect() {
    return {};
}

#endif

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

}  // namespace deskside::backends::cpu
