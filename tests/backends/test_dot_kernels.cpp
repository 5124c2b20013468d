// SIMD dot kernels against the scalar references in quant/, on quantized Gaussian data and on
// random block bytes (which reach extreme levels and scales that real quantizers rarely emit).
// A kernel may differ from the reference only in the order of its float additions across
// blocks: tolerance 1e-5 relative to the sum of |terms| (|w_i * a_i| over dequantized elements
// plus |m * s| for the offset formats), i.e. a few float ulps per block over up to 160 blocks.
// Variants the CPU cannot run are skipped with a warning.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dot_kernels.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace cpu = deskside::backends::cpu;
namespace q = deskside::quant;
using q::TypeId;

namespace {

constexpr TypeId kTypes[] = {TypeId::F32,  TypeId::F16,  TypeId::BF16, TypeId::Q4_0, TypeId::Q4_1,
                             TypeId::Q5_0, TypeId::Q5_1, TypeId::Q8_0, TypeId::IQ4_NL, TypeId::Q2_K,
                             TypeId::Q3_K, TypeId::Q4_K, TypeId::Q5_K, TypeId::Q6_K, TypeId::IQ4_XS,
                             TypeId::IQ2_XXS, TypeId::IQ2_XS, TypeId::IQ2_S, TypeId::IQ3_XXS, TypeId::IQ3_S,
                             TypeId::IQ1_S, TypeId::IQ1_M};

std::vector<float> gaussian(size_t n, std::mt19937& rng, float sigma) {
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

void set_fp16(uint16_t* field, std::mt19937& rng) {
    std::uniform_real_distribution<float> mag(0.001f, 0.05f);
    *field = q::fp32_to_fp16((rng() & 1 ? -1.0f : 1.0f) * mag(rng));
}

// Random bytes made into valid blocks: every fp16 scale a finite value of sane size. Every level
// byte stays random (Q8_0's -128 included, which llama.cpp's quantizer never writes but a file
// may hold); activations come from our quantizers, which keep them in [-127, 127].
std::vector<uint8_t> random_blocks(TypeId type, int64_t n, std::mt19937& rng) {
    std::vector<uint8_t> data(q::row_bytes(type, n));
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    const int64_t nb = n / q::type_info(type).block_size;
    auto each = [&](auto* blocks, auto fix) {
        for (int64_t i = 0; i < nb; ++i) fix(blocks[i]);
    };
    switch (type) {
        case TypeId::Q4_0: each(reinterpret_cast<q::BlockQ4_0*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::Q5_0: each(reinterpret_cast<q::BlockQ5_0*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::IQ4_NL: each(reinterpret_cast<q::BlockIq4Nl*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::Q4_1:
            each(reinterpret_cast<q::BlockQ4_1*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng), set_fp16(&b.m, rng); });
            break;
        case TypeId::Q5_1:
            each(reinterpret_cast<q::BlockQ5_1*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng), set_fp16(&b.m, rng); });
            break;
        case TypeId::Q8_0: each(reinterpret_cast<q::BlockQ8_0*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::Q2_K:
            each(reinterpret_cast<q::BlockQ2_K*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng), set_fp16(&b.dmin, rng); });
            break;
        case TypeId::Q3_K: each(reinterpret_cast<q::BlockQ3_K*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::Q4_K:
            each(reinterpret_cast<q::BlockQ4_K*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng), set_fp16(&b.dmin, rng); });
            break;
        case TypeId::Q5_K:
            each(reinterpret_cast<q::BlockQ5_K*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng), set_fp16(&b.dmin, rng); });
            break;
        case TypeId::Q6_K: each(reinterpret_cast<q::BlockQ6_K*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::IQ4_XS: each(reinterpret_cast<q::BlockIq4Xs*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::IQ2_XXS: each(reinterpret_cast<q::BlockIq2Xxs*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::IQ2_XS: each(reinterpret_cast<q::BlockIq2Xs*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::IQ2_S: each(reinterpret_cast<q::BlockIq2S*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::IQ3_XXS: each(reinterpret_cast<q::BlockIq3Xxs*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::IQ3_S: each(reinterpret_cast<q::BlockIq3S*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::IQ1_S: each(reinterpret_cast<q::BlockIq1S*>(data.data()), [&](auto& b) { set_fp16(&b.d, rng); }); break;
        case TypeId::IQ1_M:  // d is the top nibbles of the four scale words
            each(reinterpret_cast<q::BlockIq1M*>(data.data()), [&](auto& b) {
                uint16_t d, sc[4];
                set_fp16(&d, rng);
                std::memcpy(sc, b.scales, 8);
                for (int w = 0; w < 4; ++w) sc[w] = static_cast<uint16_t>((sc[w] & 0x0FFF) | ((d >> (4 * w)) & 0xF) << 12);
                std::memcpy(b.scales, sc, 8);
            });
            break;
        default: {  // float rows: random finite values instead of random bits
            const auto v = gaussian(static_cast<size_t>(n), rng, 1.0f);
            q::quant_traits(type)->from_float(v.data(), data.data(), n);
        }
    }
    return data;
}

std::vector<uint8_t> quantize(TypeId type, const std::vector<float>& x) {
    std::vector<uint8_t> out(q::row_bytes(type, static_cast<int64_t>(x.size())));
    q::quant_traits(type)->from_float(x.data(), out.data(), static_cast<int64_t>(x.size()));
    return out;
}

// Sum of |terms| the dot adds up: |w_i a_i| over dequantized elements, plus |m * s| per block
// for the formats with an offset (whose dot uses the activations' stored sum s).
double magnitude(TypeId type, const std::vector<uint8_t>& w, const std::vector<uint8_t>& a, int64_t n) {
    const q::QuantTraits* t = q::quant_traits(type);
    std::vector<float> wd(n), ad(n);
    t->to_float(w.data(), wd.data(), n);
    q::quant_traits(t->vec_dot_type)->to_float(a.data(), ad.data(), n);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::fabs(double(wd[i]) * ad[i]);
    if (t->vec_dot_type == TypeId::Q8_1) {
        const auto* act = reinterpret_cast<const q::BlockQ8_1*>(a.data());
        const size_t bb = q::type_info(type).block_bytes;
        for (int64_t b = 0; b < n / q::kQK; ++b) {
            uint16_t m;  // at byte 2 of both Q4_1 and Q5_1 blocks
            std::memcpy(&m, w.data() + b * bb + 2, 2);
            sum += std::fabs(double(q::fp16_to_fp32(m)) * q::fp16_to_fp32(act[b].s));
        }
    }
    return sum;
}

bool cpu_runs(cpu::CpuIsa isa) {
    const cpu::CpuFeatures& f = cpu::cpu_features();
    return isa == cpu::CpuIsa::Avx512 ? f.has_avx512_kernels() : f.has_avx2_kernels();
}

void check_kernels(cpu::CpuIsa isa) {
    if (!cpu_runs(isa)) {
        WARN("this CPU cannot run the " << cpu::isa_name(isa) << " kernels: skipped");
        return;
    }
    std::mt19937 rng(42);
    int kernels = 0;
    for (TypeId type : kTypes) {
        if (!cpu::has_kernel(type, isa)) continue;
        ++kernels;
        const q::QuantTraits* t = q::quant_traits(type);
        const q::VecDotFn kernel = cpu::vec_dot_for(type, isa);
        REQUIRE(kernel != t->vec_dot);
        const int64_t block = std::max<int64_t>(q::type_info(t->vec_dot_type).block_size, q::type_info(type).block_size);
        // Odd and even block counts (the AVX-512 legacy kernels take blocks in pairs); float rows
        // also get lengths that are not a multiple of the vector width.
        std::vector<int64_t> lengths = {block, 3 * block, 16 * block, 40 * block};
        if (block == 1) lengths = {1, 7, 33, 200, 4096 + 5};
        for (int64_t n : lengths) {
            for (int trial = 0; trial < 6; ++trial) {
                INFO(q::type_info(type).name << " " << cpu::isa_name(isa) << " n=" << n << " trial " << trial);
                const bool from_quantizer = trial < 3 && t->from_float != nullptr;
                const auto w = from_quantizer ? quantize(type, gaussian(n, rng, 1.0f)) : random_blocks(type, n, rng);
                const auto a = quantize(t->vec_dot_type, gaussian(n, rng, trial % 2 ? 10.0f : 0.3f));
                const double ref = t->vec_dot(n, w.data(), a.data());
                const double got = kernel(n, w.data(), a.data());
                REQUIRE(std::isfinite(got));
                CHECK(std::fabs(got - ref) <= 1e-5 * magnitude(type, w, a, n));
            }
        }
    }
    CHECK(kernels >= (isa == cpu::CpuIsa::Avx2 ? 22 : 4));
}

// The flags the Linux kernel reports for the first CPU in /proc/cpuinfo, or "" elsewhere.
std::string proc_cpuinfo_flags() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("flags", 0) == 0) return " " + line.substr(line.find(':') + 1) + " ";
    }
    return "";
}

}  // namespace

TEST_CASE("AVX2 dot kernels match the scalar references", "[cpu]") { check_kernels(cpu::CpuIsa::Avx2); }

TEST_CASE("AVX-512 dot kernels match the scalar references", "[cpu]") { check_kernels(cpu::CpuIsa::Avx512); }

TEST_CASE("CPU feature detection agrees with the Linux kernel", "[cpu]") {
    const std::string flags = proc_cpuinfo_flags();
    if (flags.empty()) {
        WARN("no /proc/cpuinfo flags: skipped");
        return;
    }
    auto listed = [&](const char* name) { return flags.find(std::string(" ") + name + " ") != std::string::npos; };
    const cpu::CpuFeatures& f = cpu::cpu_features();
    // The kernel hides a feature whose register state the OS does not enable, as we do, so the
    // two views agree both ways.
    CHECK(f.avx2 == listed("avx2"));
    CHECK(f.fma == listed("fma"));
    CHECK(f.f16c == listed("f16c"));
    CHECK(f.avx512f == listed("avx512f"));
    CHECK(f.avx512bw == listed("avx512bw"));
    CHECK(f.avx512vl == listed("avx512vl"));
    CHECK(f.avx512vnni == listed("avx512_vnni"));
    CHECK(f.avx512bf16 == listed("avx512_bf16"));
}

TEST_CASE("best_vec_dot covers every type with traits and honours the ISA setting", "[cpu]") {
    for (TypeId type : kTypes) {
        INFO(q::type_info(type).name);
        CHECK(cpu::best_vec_dot(type) != nullptr);
        CHECK(cpu::best_vec_dot(type) == cpu::vec_dot_for(type, cpu::selected_isa()));
        CHECK(cpu::vec_dot_for(type, cpu::CpuIsa::Scalar) == q::quant_traits(type)->vec_dot);
    }
    CHECK(cpu::best_vec_dot(TypeId::I32) == nullptr);
    // Types without an AVX-512 kernel of their own use the AVX2 one.
    CHECK(cpu::vec_dot_for(TypeId::Q5_K, cpu::CpuIsa::Avx512) == cpu::vec_dot_for(TypeId::Q5_K, cpu::CpuIsa::Avx2));

    CHECK(cpu::isa_from_setting("scalar") == cpu::CpuIsa::Scalar);
    CHECK_THROWS_WITH(cpu::isa_from_setting("sse9"), Catch::Contains("DESKSIDE_CPU_ISA=sse9"));
    if (cpu_runs(cpu::CpuIsa::Avx2)) {
        CHECK(cpu::isa_from_setting("avx2") == cpu::CpuIsa::Avx2);
    } else {
        CHECK_THROWS_WITH(cpu::isa_from_setting("avx2"), Catch::Contains("does not support"));
    }
    if (!cpu_runs(cpu::CpuIsa::Avx512)) {
        CHECK_THROWS_WITH(cpu::isa_from_setting("avx512"), Catch::Contains("does not support avx512"));
    }
}
