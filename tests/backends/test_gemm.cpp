// The tiled gemm kernels and SIMD activation quantizers (backends/cpu/gemm_kernels.h).
// - A gemm output must equal its single-row twin (vec_dot_for at the same level) bit for bit:
//   that is what makes prompt processing batch-invariant. Checked on every tile shape and edge
//   (rows and columns not multiples of the tile), on quantizer output and on random block bytes.
// - Against the scalar reference in quant/ a gemm output may differ only by float reordering:
//   1e-5 relative to the sum of |terms|, as the dot kernel tests allow.
// - A SIMD activation quantizer must write the bytes quant::activation_from_float writes (the
//   llama.cpp x86 rounding the reference-logit tests rely on), ties and zero blocks included.
// - CpuBackend::matmul over a batch spanning several task blocks equals, per token, the same
//   matmul run on that token alone.
// - A one-token matmul (decoding, with its weight-row prefetch) equals best_vec_dot row by row,
//   and a thread pool that spins (DESKSIDE_CPU_SPIN_US) computes the same bits as one that
//   sleeps; a bad DESKSIDE_CPU_SPIN_US is an error naming the variable.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dot_kernels.h"
#include "backends/cpu/gemm_kernels.h"
#include "kernel_test_data.h"
#include "op_harness.h"
#include "support/scoped_env.h"
#include "quant/activation_quant.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace cpu = deskside::backends::cpu;
namespace q = deskside::quant;
using q::TypeId;
using namespace deskside::test;

namespace {

constexpr TypeId kGemmTypes[] = {TypeId::Q4_0, TypeId::Q5_0, TypeId::Q8_0, TypeId::IQ4_NL, TypeId::Q4_K, TypeId::Q6_K};


}  // namespace

TEST_CASE("AVX2 gemm tiles equal the single-row kernel bit for bit", "[cpu]") {
    if (!runs_avx2()) {
        WARN("this CPU cannot run the AVX2 kernels: skipped");
        return;
    }
    std::mt19937 rng(7);
    for (TypeId type : kGemmTypes) {
        const cpu::GemmFn gemm = cpu::gemm_for(type, cpu::CpuIsa::Avx2);
        REQUIRE(gemm != nullptr);
        const cpu::CpuIsa isa = cpu::CpuIsa::Avx2;
        const q::QuantTraits* t = q::quant_traits(type);
        const q::VecDotFn dot = cpu::vec_dot_for(type, isa);
        REQUIRE(cpu::has_kernel(type, isa));
        const int64_t block = std::max(q::type_info(type).block_size, q::type_info(t->vec_dot_type).block_size);
        for (int64_t blocks : {1, 3, 9}) {
            const int64_t k = blocks * block;
            for (int trial = 0; trial < 4; ++trial) {
                // 1..13 rows and 1..11 columns cover every tile shape and remainder.
                const int64_t rows = 1 + static_cast<int64_t>(rng() % 13), cols = 1 + static_cast<int64_t>(rng() % 11);
                INFO(q::type_info(type).name << " k=" << k << " rows=" << rows << " cols=" << cols << " trial " << trial);
                const auto w = weight_rows(type, k, rows, trial % 2 == 1, rng);
                const auto a = activation_rows(t->vec_dot_type, k, cols, trial < 2 ? 0.3f : 10.0f, rng);
                const size_t ws = q::row_bytes(type, k), as = q::row_bytes(t->vec_dot_type, k);
                const size_t ys = static_cast<size_t>(rows) + 3;  // a row stride wider than the tile
                std::vector<float> y(ys * cols, NAN);
                gemm(k, w.data(), ws, rows, a.data(), as, cols, y.data(), ys);
                int mismatches = 0, out_of_tolerance = 0;
                for (int64_t c = 0; c < cols; ++c) {
                    for (int64_t r = 0; r < rows; ++r) {
                        const float got = y[c * ys + r];
                        const float single = dot(k, w.data() + r * ws, a.data() + c * as);
                        if (std::memcmp(&got, &single, sizeof(float)) != 0) ++mismatches;
                        const double ref = t->vec_dot(k, w.data() + r * ws, a.data() + c * as);
                        if (!(std::fabs(got - ref) <= 1e-5 * magnitude(type, w.data() + r * ws, a.data() + c * as, k)))
                            ++out_of_tolerance;
                    }
                    for (size_t r = rows; r < ys; ++r) CHECK(std::isnan(y[c * ys + r]));  // padding untouched
                }
                CHECK(mismatches == 0);
                CHECK(out_of_tolerance == 0);
            }
        }
    }
}

// The legacy tiles (gemm_legacy_avx2.cpp) take one weight row against up to 8 activation rows,
// more columns split into tiles of equal width: every width 1..8 and every split up to three tiles
// (17 columns), called in decreasing sizes so the per-thread scale table is reused at each size.
TEST_CASE("AVX2 legacy gemm tiles equal the single-row kernel for 1 to 17 activation rows", "[cpu][gemm]") {
    if (!runs_avx2()) {
        WARN("this CPU cannot run the AVX2 kernels: skipped");
        return;
    }
    std::mt19937 rng(17);
    for (TypeId type : {TypeId::Q4_0, TypeId::Q5_0, TypeId::Q8_0, TypeId::IQ4_NL}) {
        const cpu::GemmFn gemm = cpu::gemm_for(type, cpu::CpuIsa::Avx2);
        const q::VecDotFn dot = cpu::vec_dot_for(type, cpu::CpuIsa::Avx2);
        REQUIRE(gemm != nullptr);
        const int64_t k = 5 * q::kQK, rows = 6;
        // Random bytes: Q8_0 weights then include the level -128.
        const auto w = weight_rows(type, k, rows, true, rng);
        const auto a = activation_rows(TypeId::Q8_0, k, 17, 2.0f, rng);
        const size_t ws = q::row_bytes(type, k), as = q::row_bytes(TypeId::Q8_0, k), ys = rows + 1;
        for (int64_t cols = 17; cols >= 1; --cols) {
            INFO(q::type_info(type).name << " cols=" << cols);
            std::vector<float> y(ys * cols, NAN);
            gemm(k, w.data(), ws, rows, a.data(), as, cols, y.data(), ys);
            int mismatches = 0;
            for (int64_t c = 0; c < cols; ++c) {
                for (int64_t r = 0; r < rows; ++r) {
                    const float single = dot(k, w.data() + r * ws, a.data() + c * as);
                    if (std::memcmp(&y[c * ys + r], &single, sizeof(float)) != 0) ++mismatches;
                }
                CHECK(std::isnan(y[c * ys + rows]));
            }
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("best_gemm only pairs a tile kernel with its own single-row twin", "[cpu]") {
    for (TypeId type : kGemmTypes) {
        INFO(q::type_info(type).name);
        const cpu::GemmFn g = cpu::best_gemm(type);
        if (cpu::best_vec_dot(type) == cpu::vec_dot_for(type, cpu::CpuIsa::Avx2) && cpu::selected_isa() != cpu::CpuIsa::Scalar)
            CHECK(g == cpu::gemm_for(type, cpu::CpuIsa::Avx2));
        if (cpu::selected_isa() == cpu::CpuIsa::Scalar) CHECK(g == nullptr);
    }
    CHECK(cpu::best_gemm(TypeId::F32) == nullptr);
    CHECK(cpu::best_gemm(TypeId::IQ2_XXS) == nullptr);
}

TEST_CASE("AVX2 activation quantizers write the bytes of quant::activation_from_float", "[cpu]") {
    if (!runs_avx2()) {
        WARN("this CPU cannot run the AVX2 kernels: skipped");
        return;
    }
    std::mt19937 rng(11);
    for (TypeId type : {TypeId::Q8_0, TypeId::Q8_1, TypeId::Q8_K}) {
        INFO(q::type_info(type).name);
        const q::FromFloatFn simd = cpu::activation_quantizer_for(type, cpu::CpuIsa::Avx2);
        const q::FromFloatFn scalar = q::activation_from_float(type);
        REQUIRE(simd != nullptr);
        const int64_t n = 4 * 256;
        std::vector<std::vector<float>> inputs;
        for (float sigma : {1e-3f, 1.0f, 300.0f}) inputs.push_back(gaussian(n, rng, sigma));
        // Ties: with amax 127 the scale is exactly 1, so x.5 values test half-to-even (Q8_0/Q8_1)
        // and nearest_int's rounding (Q8_K, where -127 / max is -1 when max = 127).
        std::vector<float> ties(n);
        for (int64_t i = 0; i < n; ++i) ties[i] = i % 32 == 0 ? 127.0f : static_cast<float>(static_cast<int>(rng() % 253) - 126) + 0.5f;
        inputs.push_back(ties);
        // A zero block, and a block whose largest magnitude appears with both signs (Q8_K keeps
        // the first one's sign).
        std::vector<float> edge = gaussian(n, rng, 1.0f);
        std::fill(edge.begin(), edge.begin() + 256, 0.0f);
        edge[256 + 5] = -9.0f, edge[256 + 77] = 9.0f, edge[512 + 3] = 9.0f, edge[512 + 200] = -9.0f;
        inputs.push_back(edge);
        // Blocks led by 3 (Q8_K's iscale -127 / 3 is inexact) whose other values are the floats
        // next to level halves where the rounded product and the exact one round to different
        // levels: the reference (and llama.cpp) rounds the product first; an FMA-fused
        // multiply-add with nearest_int's magic number (what GCC made of the AVX2 quantizer
        // until 2026-12-03) does not.
        std::vector<float> halves;
        const float iscale = -127.0f / 3.0f;
        for (int level = -120; level < 120 && halves.size() < static_cast<size_t>(n); ++level) {
            float v = (static_cast<float>(level) + 0.5f) / iscale;
            for (int step = 0; step < 32; ++step) v = std::nextafter(v, -10.0f);
            for (int step = 0; step < 64; ++step) {
                v = std::nextafter(v, 10.0f);
                const volatile float product = iscale * v;
                if (std::nearbyint(product) != std::fma(iscale, v, 12582912.0f) - 12582912.0f) {
                    if (halves.size() % 256 == 0) halves.push_back(3.0f);
                    if (halves.size() < static_cast<size_t>(n)) halves.push_back(v);
                }
            }
        }
        REQUIRE(halves.size() > 64);  // 120 in the first block
        halves.resize(n, 0.0f);
        inputs.push_back(halves);
        for (size_t i = 0; i < inputs.size(); ++i) {
            INFO("input " << i);
            std::vector<uint8_t> a(q::row_bytes(type, n), 0x5A), b(q::row_bytes(type, n), 0xA5);
            simd(inputs[i].data(), a.data(), n);
            scalar(inputs[i].data(), b.data(), n);
            CHECK(a == b);
        }
    }
    CHECK(cpu::best_activation_quantizer(TypeId::F16) == q::activation_from_float(TypeId::F16));
}

TEST_CASE("CPU matmul over a multi-block batch equals each token computed alone", "[cpu]") {
    cpu::CpuBackend be(2);
    using deskside::test::DeviceTensor;
    for (TypeId type : {TypeId::Q4_0, TypeId::Q8_0, TypeId::Q4_K, TypeId::Q6_K, TypeId::Q4_1}) {
        INFO(q::type_info(type).name);
        // 70 tokens span two 64-token task blocks; 37 rows leave a partial tile and task.
        const int64_t k = 512, n_out = 37, m = 70;
        DeviceTensor w(be, type, k, n_out, deskside::test::random_values(k * n_out, 21));
        const std::vector<float> xv = deskside::test::random_values(k * m, 22, -2.0f, 2.0f);
        DeviceTensor x(be, TypeId::F32, k, m, xv);
        DeviceTensor y(be, TypeId::F32, n_out, m);
        be.matmul(w.t(), x.t(), y.t());
        const std::vector<float> batched = y.values();
        CHECK(y.guard_intact());
        int differing_tokens = 0;
        for (int64_t j = 0; j < m; ++j) {
            DeviceTensor x1(be, TypeId::F32, k, 1, std::vector<float>(xv.begin() + j * k, xv.begin() + (j + 1) * k));
            DeviceTensor y1(be, TypeId::F32, n_out, 1);
            be.matmul(w.t(), x1.t(), y1.t());
            const std::vector<float> alone = y1.values();
            if (std::memcmp(alone.data(), batched.data() + j * n_out, n_out * sizeof(float)) != 0) ++differing_tokens;
        }
        CHECK(differing_tokens == 0);
    }
}

TEST_CASE("CPU decode matmul equals best_vec_dot per row, with a sleeping or a spinning pool", "[cpu]") {
    using deskside::test::DeviceTensor;
    for (const char* spin : {"0", "50"}) {
        deskside::test::ScopedEnv env("DESKSIDE_CPU_SPIN_US", spin);
        cpu::CpuBackend be(2);
        for (TypeId type : {TypeId::Q4_0, TypeId::Q8_0, TypeId::Q4_K, TypeId::Q6_K, TypeId::Q4_1}) {
            INFO("spin " << spin << " us, " << q::type_info(type).name);
            // 1000 rows: many tasks, so both threads run and every row but the last prefetches.
            const int64_t k = 512, n_out = 1000;
            DeviceTensor w(be, type, k, n_out, deskside::test::random_values(k * n_out, 31));
            const std::vector<float> xv = deskside::test::random_values(k, 32, -2.0f, 2.0f);
            DeviceTensor x(be, TypeId::F32, k, 1, xv);
            DeviceTensor y(be, TypeId::F32, n_out, 1);
            for (int step = 0; step < 3; ++step) be.matmul(w.t(), x.t(), y.t());  // several pool loops
            CHECK(y.guard_intact());
            const q::TypeId dot_type = q::quant_traits(type)->vec_dot_type;
            std::vector<uint8_t> a(q::row_bytes(dot_type, k));
            cpu::best_activation_quantizer(dot_type)(xv.data(), a.data(), k);
            const std::vector<float> got = y.values();
            int mismatches = 0;
            for (int64_t r = 0; r < n_out; ++r) {
                const float want = cpu::best_vec_dot(type)(k, cpu::host_row(w.t(), r), a.data());
                if (std::memcmp(&want, &got[r], sizeof(float)) != 0) ++mismatches;
            }
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("DESKSIDE_CPU_SPIN_US must be a whole number of microseconds", "[cpu]") {
    for (const char* bad : {"abc", "-1", "20000", "5us", " 5"}) {
        INFO(bad);
        deskside::test::ScopedEnv env("DESKSIDE_CPU_SPIN_US", bad);
        CHECK_THROWS_WITH(cpu::CpuBackend(2), Catch::Contains("DESKSIDE_CPU_SPIN_US=" + std::string(bad)));
    }
    deskside::test::ScopedEnv env("DESKSIDE_CPU_SPIN_US", "10000");
    CHECK_NOTHROW(cpu::CpuBackend(2));
}
