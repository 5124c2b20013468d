// The CPU backend on TQ1_0, TQ2_0 and MXFP4 weights (backends/cpu/dot_tq_mxfp4_avx2.cpp and the
// MXFP4 tile of gemm_legacy_avx2.cpp), against the scalar references in quant/:
// - an AVX2 dot may differ from the reference only in the order of its float additions across
//   blocks: 1e-5 relative to sum |w_i a_i|, as tests/backends/test_dot_kernels.cpp allows, on
//   quantizer output and on random block bytes (every TQ1_0 byte value, including those above
//   242 that no quantizer writes; MXFP4 scales 2^-13 .. 2^7);
// - the MXFP4 gemm tile equals its single-row twin bit for bit for 1 to 17 activation rows;
// - CpuBackend says it supports get_rows and matmul for the three types; get_rows equals
//   quant::to_float; matmul equals the double-precision dot of the dequantized operands within
//   2e-2 (as tests/backends/test_cpu_ops.cpp allows), a token alone equals the same token inside a
//   batch bit for bit, on the real MXFP4 expert stack of synth-gptoss-mxfp4_moe.gguf
//   ([256, 256, 8], multiplied as one [256, 2048] matrix) and on quantized random matrices.
// Variants the CPU cannot run are skipped with a warning.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dot_kernels.h"
#include "backends/cpu/gemm_kernels.h"
#include "kernel_test_data.h"
#include "models/gguf.h"
#include "op_harness.h"
#include "quant/activation_quant.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"
#include "support/index_args.h"
#include "support/paths.h"

namespace cpu = deskside::backends::cpu;
namespace q = deskside::quant;
using q::TypeId;
using namespace deskside::test;

namespace {

constexpr TypeId kTypes[] = {TypeId::TQ1_0, TypeId::TQ2_0, TypeId::MXFP4};

// Random block bytes with every scale finite and of a sane size: the fp16 d of the ternary
// blocks (their last field), MXFP4's exponent in [114, 134].
std::vector<uint8_t> random_blocks(TypeId type, int64_t k, int64_t rows, std::mt19937& rng) {
    std::vector<uint8_t> data(q::row_bytes(type, k) * rows);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    const size_t bb = q::type_info(type).block_bytes;
    std::uniform_real_distribution<float> mag(0.001f, 0.05f);
    for (size_t at = 0; at < data.size(); at += bb) {
        if (type == TypeId::MXFP4) {
            data[at] = static_cast<uint8_t>(114 + rng() % 21);
        } else {
            const uint16_t d = q::fp32_to_fp16((rng() & 1 ? -1.0f : 1.0f) * mag(rng));
            std::memcpy(data.data() + at + bb - 2, &d, 2);
        }
    }
    return data;
}

std::vector<uint8_t> weights(TypeId type, int64_t k, int64_t rows, bool random_bytes, std::mt19937& rng) {
    return random_bytes ? random_blocks(type, k, rows, rng) : weight_rows(type, k, rows, false, rng);
}

}  // namespace

TEST_CASE("AVX2 ternary and MXFP4 dot kernels match the scalar references", "[cpu]") {
    if (!runs_avx2()) {
        WARN("this CPU cannot run the AVX2 kernels: skipped");
        return;
    }
    std::mt19937 rng(42);
    for (TypeId type : kTypes) {
        const q::QuantTraits* t = q::quant_traits(type);
        REQUIRE(cpu::has_kernel(type, cpu::CpuIsa::Avx2));
        const q::VecDotFn kernel = cpu::vec_dot_for(type, cpu::CpuIsa::Avx2);
        REQUIRE(kernel != t->vec_dot);
        // No AVX-512 kernel of their own: that level runs the AVX2 one.
        CHECK(cpu::vec_dot_for(type, cpu::CpuIsa::Avx512) == kernel);
        const int64_t block = std::max(q::type_info(type).block_size, q::type_info(t->vec_dot_type).block_size);
        for (int64_t n : {block, 3 * block, 16 * block, 40 * block}) {
            for (int trial = 0; trial < 6; ++trial) {
                INFO(q::type_info(type).name << " n=" << n << " trial " << trial);
                const auto w = weights(type, n, 1, trial >= 3, rng);
                const auto a = activation_rows(t->vec_dot_type, n, 1, trial % 2 ? 10.0f : 0.3f, rng);
                const double ref = t->vec_dot(n, w.data(), a.data());
                const double got = kernel(n, w.data(), a.data());
                REQUIRE(std::isfinite(got));
                CHECK(std::fabs(got - ref) <= 1e-5 * magnitude(type, w.data(), a.data(), n));
            }
        }
    }
}

TEST_CASE("AVX2 MXFP4 gemm tiles equal the single-row kernel bit for bit", "[cpu][gemm]") {
    if (!runs_avx2()) {
        WARN("this CPU cannot run the AVX2 kernels: skipped");
        return;
    }
    const cpu::GemmFn gemm = cpu::gemm_for(TypeId::MXFP4, cpu::CpuIsa::Avx2);
    const q::VecDotFn dot = cpu::vec_dot_for(TypeId::MXFP4, cpu::CpuIsa::Avx2);
    REQUIRE(gemm != nullptr);
    if (cpu::selected_isa() != cpu::CpuIsa::Scalar) CHECK(cpu::best_gemm(TypeId::MXFP4) == gemm);
    std::mt19937 rng(17);
    for (int64_t blocks : {1, 5, 9}) {
        const int64_t k = blocks * q::kQK, rows = 1 + static_cast<int64_t>(rng() % 13);
        const auto w = weights(TypeId::MXFP4, k, rows, blocks == 5, rng);
        const auto a = activation_rows(TypeId::Q8_0, k, 17, 2.0f, rng);
        const size_t ws = q::row_bytes(TypeId::MXFP4, k), as = q::row_bytes(TypeId::Q8_0, k), ys = rows + 1;
        for (int64_t cols = 17; cols >= 1; --cols) {
            INFO("k=" << k << " rows=" << rows << " cols=" << cols);
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

namespace {

// get_rows and matmul of the CpuBackend on one weight matrix `w` [k, n] of `type`.
void check_cpu_ops(TypeId type, const std::vector<uint8_t>& w, int64_t k, int64_t n) {
    INFO(q::type_info(type).name << " [" << k << ", " << n << "]");
    cpu::CpuBackend be(2);
    REQUIRE(be.supports(deskside::backends::Op::GetRows, type));
    REQUIRE(be.supports(deskside::backends::Op::Matmul, type));
    std::vector<float> wd(static_cast<size_t>(k * n));
    q::quant_traits(type)->to_float(w.data(), wd.data(), k * n);

    auto wbuf = be.map_weight_matrix(w.data(), type, k, n);
    const auto wt = deskside::backends::make_tensor(wbuf.get(), 0, type, k, n);
    const std::vector<int32_t> ids{static_cast<int32_t>(n - 1), 0, 3, static_cast<int32_t>(n / 2)};
    DeviceTensor rows(be, TypeId::F32, k, static_cast<int64_t>(ids.size()));
    be.get_rows(wt, index_tensor(be, ids), rows.t());
    const std::vector<float> got = rows.values();
    for (size_t i = 0; i < ids.size(); ++i)
        CHECK(std::memcmp(got.data() + i * k, wd.data() + ids[i] * k, k * sizeof(float)) == 0);
    CHECK(rows.guard_intact());

    const int64_t m = 7;
    const std::vector<float> xv = random_values(static_cast<size_t>(k * m), 3);
    DeviceTensor x(be, TypeId::F32, k, m, xv);
    DeviceTensor y(be, TypeId::F32, n, m);
    be.matmul(wt, x.t(), y.t());
    const q::TypeId act = q::quant_traits(type)->vec_dot_type;
    std::vector<uint8_t> xq(q::row_bytes(act, k));
    std::vector<float> xd(static_cast<size_t>(k));
    std::vector<double> ref(static_cast<size_t>(n * m));
    for (int64_t j = 0; j < m; ++j) {
        q::activation_from_float(act)(xv.data() + j * k, xq.data(), k);
        q::quant_traits(act)->to_float(xq.data(), xd.data(), k);
        for (int64_t r = 0; r < n; ++r) {
            double s = 0;
            for (int64_t i = 0; i < k; ++i) s += double(wd[r * k + i]) * xd[i];
            ref[j * n + r] = s;
        }
    }
    CHECK(max_abs_diff(y.values(), ref) <= 2e-2);
    CHECK(y.guard_intact());

    // Token 4 alone (the decode path) gives the bits it got inside the batch (the gemm tiles).
    DeviceTensor x1(be, TypeId::F32, k, 1, std::vector<float>(xv.begin() + 4 * k, xv.begin() + 5 * k));
    DeviceTensor y1(be, TypeId::F32, n, 1);
    be.matmul(wt, x1.t(), y1.t());
    const std::vector<float> batched = y.values(), alone = y1.values();
    CHECK(std::memcmp(alone.data(), batched.data() + 4 * n, n * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("CPU backend get_rows and matmul on ternary and MXFP4 weights", "[cpu-ops]") {
    std::mt19937 rng(9);
    for (TypeId type : kTypes) {
        const int64_t k = 768, n = 37;
        check_cpu_ops(type, weights(type, k, n, false, rng), k, n);
    }
    // gpt-oss's expert stack, as the loader maps it: [256, 256 * 8] rows of MXFP4.
    const auto file = deskside::models::GgufFile::open(shared_path("models/synth-gptoss-mxfp4_moe.gguf"));
    const auto* t = file.find_tensor("blk.0.ffn_up_exps.weight");
    REQUIRE(t != nullptr);
    REQUIRE(t->type == TypeId::MXFP4);
    REQUIRE(t->shape.size() == 3);
    const int64_t k = t->shape[0], n = t->shape[1] * t->shape[2];
    check_cpu_ops(TypeId::MXFP4, std::vector<uint8_t>(t->data, t->data + t->n_bytes), k, n);
}
