// The Vulkan ops that reproduce the CPU backend's arithmetic bit for bit (docs/VULKAN.md,
// "Bit-exact ops") give its bytes on many inputs, not only on the few a model run meets: the
// tests compare whole outputs byte for byte and name the first inputs that differ. The CPU side
// is the definition (its AVX2 level, where the kernels differ by instruction set). On a device
// without shaderFloat64 the ops keep the device's own exp and FMA, and these tests are skipped.
#include <catch2/catch.hpp>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dot_kernels.h"
#include "backends/devices.h"
#include "backends/expf_glibc.h"
#include "../engine/reference_check.h"
#include "op_harness.h"
#include "quant/float16.h"
#include "support/index_args.h"

namespace deskside::backends {
namespace {

using quant::TypeId;
using test::DeviceTensor;

// vulkan0 when it has shaderFloat64 (the exact variants), else nullptr with a warning.
std::unique_ptr<Backend> exact_vulkan_or_skip() {
    std::vector<backends::AbsentApi> absent;
    const std::vector<DeviceInfo> devices = list_devices(&absent);
    test::fail_for_absent_required(devices, absent, "vulkan");  // DESKSIDE_REQUIRE_DEVICES (CI): a failure
    for (const DeviceInfo& d : devices) {
        if (d.api != "vulkan" || !d.usable) continue;
        if (std::find(d.features.begin(), d.features.end(), "fp64") == d.features.end()) {
            WARN("SKIPPED: " << d.name << " has no shaderFloat64: its ops are not the CPU's bits");
            return nullptr;
        }
        return open_device(d.name);
    }
    WARN("SKIPPED: no Vulkan device (see `deskside devices`)");
    return nullptr;
}

// `op` on the CPU backend and on the device, from `inputs`; CHECKs that the outputs are the same
// bytes, and reports the first few inputs where they are not.
void check_same_bits(Backend& vk, const std::string& what, const std::vector<float>& inputs, int64_t ne0,
                     const std::function<void(Backend&, const Tensor& x, const Tensor& y)>& op) {
    const int64_t ne1 = static_cast<int64_t>(inputs.size()) / ne0;
    cpu::CpuBackend cpu(2);
    std::vector<float> out[2];
    Backend* backends[2] = {&cpu, &vk};
    for (int b = 0; b < 2; ++b) {
        DeviceTensor x(*backends[b], TypeId::F32, ne0, ne1, inputs);
        DeviceTensor y(*backends[b], TypeId::F32, ne0, ne1);
        op(*backends[b], x.t(), y.t());
        out[b] = y.values();
    }
    int64_t differing = 0;
    std::ostringstream first;
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (std::memcmp(&out[0][i], &out[1][i], sizeof(float)) == 0) continue;
        if (++differing <= 5)
            first << " x=" << inputs[i] << ": cpu " << out[0][i] << ", vulkan " << out[1][i] << ";";
    }
    INFO(what << ": " << differing << " of " << inputs.size() << " outputs differ:" << first.str());
    CHECK(differing == 0);
}

// Values across the range an activation meets, plus exact halves and integers.
std::vector<float> activation_like(size_t n, uint32_t seed, float spread) {
    std::vector<float> v = test::random_values(n, seed, -spread, spread);
    for (size_t i = 0; i < n / 16; ++i) v[i] = std::ldexp(static_cast<float>(static_cast<int>(i) - static_cast<int>(n / 32)), -3);
    return v;
}

}  // namespace

TEST_CASE("expf_glibc (cpu_expf's C++ twin) is the host's expf", "[backends]") {
    int64_t differing = 0;
    std::ostringstream first;
    // Every 61st float bit pattern (all 2^32 agreed once); NaNs compare as NaNs.
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 61) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(u));
        const float want = std::exp(x);
        const float got = expf_glibc(x);
        if (std::isnan(want) && std::isnan(got)) continue;
        if (std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(got) && ++differing <= 5) first << " " << x;
    }
    INFO(differing << " inputs differ, the first:" << first.str());
    CHECK(differing == 0);
}

TEST_CASE("vulkan silu gives the CPU's bits", "[vulkan]") {
    auto vk = exact_vulkan_or_skip();
    if (!vk) return;
    for (const float spread : {1.0f, 8.0f, 40.0f}) {
        check_same_bits(*vk, "silu, |x| < " + std::to_string(spread), activation_like(1 << 18, 3, spread), 1024,
                        [](Backend& be, const Tensor& x, const Tensor& y) { be.silu(x, y); });
    }
}

TEST_CASE("vulkan gelu gives the CPU's bits (its F16 table)", "[vulkan]") {
    auto vk = exact_vulkan_or_skip();
    if (!vk) return;
    check_same_bits(*vk, "gelu", activation_like(1 << 16, 4, 12.0f), 1024,
                    [](Backend& be, const Tensor& x, const Tensor& y) { be.gelu(x, y); });
}

TEST_CASE("vulkan rms_norm gives the CPU's bits (double sum in order)", "[vulkan]") {
    auto vk = exact_vulkan_or_skip();
    if (!vk) return;
    for (const int64_t ne0 : {64, 640, 2048, 3000}) {
        const std::vector<float> w = test::random_values(ne0, 6, 0.5f, 1.5f);
        check_same_bits(*vk, "rms_norm, " + std::to_string(ne0) + " wide", activation_like(ne0 * 16, 5, 30.0f), ne0,
                        [&](Backend& be, const Tensor& x, const Tensor& y) {
                            DeviceTensor weight(be, TypeId::F32, ne0, 1, w);
                            be.rms_norm(x, weight.t(), 1e-6f, y);
                        });
    }
}

TEST_CASE("vulkan rope gives the CPU's bits (its rotations, one FMA each)", "[vulkan]") {
    auto vk = exact_vulkan_or_skip();
    if (!vk) return;
    for (const bool neox : {false, true}) {
        RopeParams p;
        p.n_head = 4;
        p.head_dim = 64;
        p.n_rot = 64;
        p.neox = neox;
        const int64_t n = 40;
        std::vector<int32_t> pos(n);
        for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i * 997 % 5000);
        check_same_bits(*vk, neox ? "rope neox" : "rope", activation_like(p.n_head * p.head_dim * n, 7, 4.0f),
                        p.n_head * p.head_dim, [&](Backend& be, const Tensor& x, const Tensor& y) {
                            be.copy(x, y);
                            backends::RopeParams rp = p;
                            rp.n_ctx = 5000;
                            be.rope(y, test::index_tensor(be, pos), rp);
                        });
    }
}

namespace {

// The body of the test below, at the CPU's AVX2 level.
void check_matmul_bits_every_type() {
    auto vk = exact_vulkan_or_skip();
    if (!vk) return;
    // 44 rows: 5 groups of 8 (the CPU's x8 layouts) and a 4-row tail; k = 4 super-blocks.
    const int64_t k = 1024, n = 44;
    for (const TypeId type : {TypeId::F32, TypeId::F16, TypeId::BF16, TypeId::Q8_0, TypeId::Q4_0, TypeId::Q4_1,
                              TypeId::Q5_0, TypeId::Q5_1, TypeId::Q2_K, TypeId::Q3_K, TypeId::Q4_K,
                              TypeId::Q5_K, TypeId::Q6_K}) {  // IQ4_*: quant/ has no quantizer for them
        const std::vector<float> wf = test::random_values(k * n, 8);
        std::vector<uint8_t> w(quant::row_bytes(type, k) * n);
        for (int64_t r = 0; r < n; ++r)
            quant::quant_traits(type)->from_float(wf.data() + r * k, w.data() + r * quant::row_bytes(type, k), k);
        for (const int64_t m : {1, 6}) {
            const std::vector<float> x = activation_like(k * m, 9, 3.0f);
            std::vector<float> out[2];
            cpu::CpuBackend cpu(2);
            Backend* backends[2] = {&cpu, vk.get()};
            for (int b = 0; b < 2; ++b) {
                auto wbuf = backends[b]->map_weight_matrix(w.data(), type, k, n);
                DeviceTensor xt(*backends[b], TypeId::F32, k, m, x);
                DeviceTensor yt(*backends[b], TypeId::F32, n, m);
                backends[b]->matmul(make_tensor(wbuf.get(), 0, type, k, n), xt.t(), yt.t());
                out[b] = yt.values();
            }
            int64_t differing = 0;
            std::ostringstream first;
            for (size_t i = 0; i < out[0].size(); ++i) {
                if (std::memcmp(&out[0][i], &out[1][i], sizeof(float)) != 0 && ++differing <= 3)
                    first << " row " << i % n << " col " << i / n << ": cpu " << out[0][i] << ", vulkan " << out[1][i] << ";";
            }
            INFO(quant::type_info(type).name << ", m = " << m << ": " << differing << " of " << out[0].size()
                                             << " outputs differ:" << first.str());
            CHECK(differing == 0);
        }
    }
}

}  // namespace

// vulkan0 gives the AVX2 level's bits: where this process runs at another level (AVX-512) the check
// runs in a child at DESKSIDE_CPU_ISA=avx2, so it runs on every machine with AVX2.
TEST_CASE("vulkan matmuls give the CPU's bits for every weight type, decode and prompt", "[vulkan]") {
    test::at_cpu_isa(cpu::CpuIsa::Avx2, check_matmul_bits_every_type);
}

TEST_CASE("vulkan matmuls give the CPU's bits for the low-bit i-quants, decode and prompt", "[vulkan]") {
    auto vk = exact_vulkan_or_skip();
    if (!vk) return;
    // These types have AVX2 kernels only, so every SIMD level of the CPU runs them (and the AVX2
    // activation quantizer): matmul_q8k.comp repeats their lanes.
    if (cpu::selected_isa() == cpu::CpuIsa::Scalar) {
        WARN("SKIPPED: the CPU backend runs its scalar references; vulkan0 gives the AVX2 kernels' bits");
        return;
    }
    const int64_t k = 1024, n = 44;
    for (const TypeId type : {TypeId::IQ2_XXS, TypeId::IQ2_XS, TypeId::IQ2_S, TypeId::IQ3_XXS, TypeId::IQ3_S,
                              TypeId::IQ1_S, TypeId::IQ1_M}) {
        // No quantizer: random codebook indices, signs and scales under a small fp16 d.
        std::mt19937 rng(10);
        std::vector<uint8_t> w(quant::row_bytes(type, k) * n);
        for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
        std::uniform_real_distribution<float> scale(-0.004f, 0.004f);
        for (size_t at = 0; at < w.size(); at += quant::type_info(type).block_bytes)
            test::set_block_scale(type, w.data() + at, quant::fp32_to_fp16(scale(rng)));
        for (const int64_t m : {1, 6}) {
            const std::vector<float> x = activation_like(k * m, 9, 3.0f);
            std::vector<float> out[2];
            cpu::CpuBackend cpu(2);
            Backend* backends[2] = {&cpu, vk.get()};
            for (int b = 0; b < 2; ++b) {
                auto wbuf = backends[b]->map_weight_matrix(w.data(), type, k, n);
                DeviceTensor xt(*backends[b], TypeId::F32, k, m, x);
                DeviceTensor yt(*backends[b], TypeId::F32, n, m);
                backends[b]->matmul(make_tensor(wbuf.get(), 0, type, k, n), xt.t(), yt.t());
                out[b] = yt.values();
            }
            int64_t differing = 0;
            for (size_t i = 0; i < out[0].size(); ++i)
                differing += std::memcmp(&out[0][i], &out[1][i], sizeof(float)) != 0;
            INFO(quant::type_info(type).name << ", m = " << m << ": " << differing << " of " << out[0].size()
                                             << " outputs differ");
            CHECK(differing == 0);
        }
    }
}

}  // namespace deskside::backends
