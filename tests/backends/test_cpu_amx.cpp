// AMX detection (backends/cpu/cpu_features.h): where it says the process may use AMX-INT8, a tile
// product runs and equals the integer product computed here. Elsewhere the test says why it did
// not run (no AMX in the CPU, or the kernel refused the tile state) and checks that detection
// reports no usable AMX.
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "backends/cpu/amx_tile.h"
#include "backends/cpu/cpu_features.h"

namespace cpu = deskside::backends::cpu;

TEST_CASE("AMX-INT8 where detected: a tile product equals the integer product", "[cpu][amx]") {
    const cpu::CpuFeatures& f = cpu::cpu_features();
    if (!f.amx_tile) {
        CHECK_FALSE(f.has_amx_int8());
        CHECK_FALSE(f.has_amx_bf16());
        WARN("skipped: this CPU (or its OS, XCR0) has no AMX tiles; CI on an AMX machine runs this test");
        return;
    }
    if (!f.amx_permitted) {
        CHECK_FALSE(f.has_amx_int8());
        WARN("skipped: the CPU has AMX but the kernel refused arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)");
        return;
    }
    if (!f.has_amx_int8()) {
        WARN("skipped: the CPU has AMX tiles but not AMX-INT8");
        return;
    }
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> byte(-128, 127);
    std::vector<int8_t> a(cpu::kAmxRows * cpu::kAmxK), b(cpu::kAmxK * 16), b_vnni(b.size());
    for (auto& x : a) x = static_cast<int8_t>(byte(rng));
    for (auto& x : b) x = static_cast<int8_t>(byte(rng));
    for (int k = 0; k < cpu::kAmxK; ++k) {
        for (int n = 0; n < 16; ++n) b_vnni[(k / 4) * 64 + n * 4 + k % 4] = b[k * 16 + n];
    }
    std::vector<int32_t> c(cpu::kAmxRows * 16), want(c.size());
    for (size_t i = 0; i < c.size(); ++i) c[i] = want[i] = static_cast<int32_t>(i) - 100;  // accumulates
    for (int m = 0; m < cpu::kAmxRows; ++m) {
        for (int n = 0; n < 16; ++n) {
            for (int k = 0; k < cpu::kAmxK; ++k) want[m * 16 + n] += int32_t{a[m * cpu::kAmxK + k]} * b[k * 16 + n];
        }
    }
    cpu::amx_int8_tile_product(a.data(), b_vnni.data(), c.data());
    CHECK(c == want);
}
