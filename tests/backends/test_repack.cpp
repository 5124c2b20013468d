// The row-interleaved (x8) weight layouts of backends/cpu/repack.h and their kernels.
// - Layout round trip: every row unpacked from the x8 layout has the original GGUF bytes
//   (groups of 8 and the plain tail rows of a matrix whose row count is not a multiple of 8).
// - CpuBackend::map_weight_matrix + get_rows gives the dequantized original rows (a tied
//   embedding that is also the output head), and picks the x8 layout wherever it should.
// - The x8 kernels against the scalar reference (quant_traits()->vec_dot on the original
//   rows): within 1e-5 of the sum of |terms|, the tolerance of the dot and gemm kernel tests.
//   k of 1, 2 and many blocks; quantized Gaussians and random block bytes.
// - Batch invariance: a kernel output is bit-identical for every tile width, and
//   CpuBackend::matmul of a repacked matrix gives each token of a batch the bits of that token
//   computed alone (odd row counts, so the plain tail rows are covered too).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dot_kernels.h"
#include "backends/cpu/repack.h"
#include "kernel_test_data.h"
#include "quant/activation_quant.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace cpu = deskside::backends::cpu;
namespace q = deskside::quant;
using q::TypeId;
using namespace deskside::test;

namespace {

constexpr TypeId kRepackTypes[] = {TypeId::Q4_0, TypeId::Q4_K};

// Integer sums of the Q8_0 blocks of `rows` activation rows (what matmul hands the Q4_0x8 kernel).
std::vector<int16_t> block_sums(const std::vector<uint8_t>& a, int64_t k, int64_t rows) {
    std::vector<int16_t> sums;
    const auto* blocks = reinterpret_cast<const q::BlockQ8_0*>(a.data());
    for (int64_t i = 0; i < k / q::kQK * rows; ++i) {
        int s = 0;
        for (int8_t v : blocks[i].qs) s += v;
        sums.push_back(static_cast<int16_t>(s));
    }
    return sums;
}

}  // namespace

TEST_CASE("x8 layouts unpack to the original GGUF rows", "[repack]") {
    std::mt19937 rng(3);
    for (TypeId type : kRepackTypes) {
        const cpu::WeightLayout layout = cpu::x8_layout_of(type);
        REQUIRE(layout != cpu::WeightLayout::Plain);
        const int64_t block = q::type_info(type).block_size;
        for (int64_t blocks : {1, 2, 7}) {
            for (int64_t rows : {3, 8, 13, 24}) {
                INFO(q::type_info(type).name << " blocks=" << blocks << " rows=" << rows);
                const int64_t k = blocks * block;
                const auto w = weight_rows(type, k, rows, true, rng);
                std::vector<uint8_t> packed(w.size(), 0);
                cpu::repack_matrix(layout, w.data(), k, rows, packed.data());
                const size_t rb = q::row_bytes(type, k);
                // A layout that only copied would pass the round trip: the groups must move bytes.
                if (rows >= 8) CHECK(std::memcmp(packed.data(), w.data(), 8 * rb) != 0);
                for (int64_t r = 0; r < rows; ++r) {
                    std::vector<uint8_t> row(rb, 0xEE);
                    cpu::unpack_row(layout, packed.data(), k, rows, r, row.data());
                    CHECK(std::memcmp(row.data(), w.data() + r * rb, rb) == 0);
                }
            }
        }
    }
    CHECK(cpu::x8_layout_of(TypeId::Q8_0) == cpu::WeightLayout::Plain);
    CHECK_THROWS_WITH(cpu::repack_matrix(cpu::WeightLayout::Q4_0x8, nullptr, 40, 8, nullptr),
                      Catch::Contains("not a multiple of 32"));
}

TEST_CASE("get_rows of a repacked weight matrix gives the dequantized original rows", "[repack]") {
    cpu::CpuBackend be(2);
    std::mt19937 rng(5);
    const char* setting = std::getenv("DESKSIDE_CPU_REPACK");
    const bool expect_x8 = cpu::selected_isa() != cpu::CpuIsa::Scalar && (setting == nullptr || std::string_view(setting) != "0");
    for (TypeId type : kRepackTypes) {
        const int64_t k = 3 * q::type_info(type).block_size, rows = 21;
        INFO(q::type_info(type).name);
        const auto w = weight_rows(type, k, rows, false, rng);
        auto buf = be.map_weight_matrix(w.data(), type, k, rows);
        const auto layout = static_cast<cpu::HostBuffer*>(buf.get())->layout();
        CHECK(layout == (expect_x8 ? cpu::x8_layout_of(type) : cpu::WeightLayout::Plain));
        const deskside::backends::Tensor table = deskside::backends::make_tensor(buf.get(), 0, type, k, rows);
        std::vector<int32_t> ids;
        for (int32_t r = rows - 1; r >= 0; --r) ids.push_back(r);
        ids.push_back(7), ids.push_back(7), ids.push_back(16);
        auto out = be.alloc(ids.size() * k * sizeof(float));
        be.get_rows(table, ids, deskside::backends::make_tensor(out.get(), 0, TypeId::F32, k, static_cast<int64_t>(ids.size())));
        std::vector<float> got(ids.size() * k), want(k);
        be.download(*out, 0, got.data(), got.size() * sizeof(float));
        for (size_t i = 0; i < ids.size(); ++i) {
            q::quant_traits(type)->to_float(w.data() + ids[i] * q::row_bytes(type, k), want.data(), k);
            CHECK(std::memcmp(got.data() + i * k, want.data(), k * sizeof(float)) == 0);
        }
        // Rows of an x8 matrix are not separately addressable.
        if (layout != cpu::WeightLayout::Plain) {
            const int32_t first = 0;
            CHECK_THROWS_WITH(be.get_rows(table.rows(8, 8), {&first, 1}, deskside::backends::make_tensor(out.get(), 0, TypeId::F32, k, 1)),
                              Catch::Contains("whole"));
            CHECK_THROWS_WITH(be.copy(table.rows(0, 1), deskside::backends::make_tensor(out.get(), 0, TypeId::F32, k, 1)),
                              Catch::Contains("row-interleaved"));
        }
    }
    // Types without an x8 layout stay in place.
    std::vector<uint8_t> q8(q::row_bytes(TypeId::Q8_0, 64) * 16);
    auto buf = be.map_weight_matrix(q8.data(), TypeId::Q8_0, 64, 16);
    CHECK(static_cast<cpu::HostBuffer*>(buf.get())->data() == q8.data());
}

TEST_CASE("x8 kernels match the scalar reference and are bit-identical for every tile width", "[repack]") {
    if (!runs_avx2()) {
        WARN("this CPU cannot run the AVX2 kernels: skipped");
        return;
    }
    std::mt19937 rng(9);
    for (TypeId type : kRepackTypes) {
        const cpu::WeightLayout layout = cpu::x8_layout_of(type);
        const cpu::RepackedGemmFn kernel = cpu::repacked_gemm(layout);
        REQUIRE(kernel != nullptr);
        const q::QuantTraits* t = q::quant_traits(type);
        const int64_t block = q::type_info(type).block_size;
        for (int64_t blocks : {1, 2, 16}) {
            for (int trial = 0; trial < 4; ++trial) {
                const int64_t k = blocks * block, groups = 1 + static_cast<int64_t>(rng() % 3), rows = 8 * groups;
                const int64_t cols = 1 + static_cast<int64_t>(rng() % 9);
                INFO(q::type_info(type).name << " k=" << k << " rows=" << rows << " cols=" << cols << " trial " << trial);
                const auto w = weight_rows(type, k, rows, trial % 2 == 1, rng);
                std::vector<uint8_t> packed(w.size());
                cpu::repack_matrix(layout, w.data(), k, rows, packed.data());
                const auto a = activation_rows(t->vec_dot_type, k, cols, trial < 2 ? 0.3f : 10.0f, rng);
                const auto sums = block_sums(a, k, cols);
                const size_t ws = q::row_bytes(type, k), as = q::row_bytes(t->vec_dot_type, k);
                const size_t ys = static_cast<size_t>(rows) + 5;
                std::vector<float> y(ys * cols, NAN);
                kernel(k, packed.data(), groups, a.data(), as, sums.data(), k / q::kQK, cols, y.data(), ys);
                int out_of_tolerance = 0, mismatches = 0;
                for (int64_t c = 0; c < cols; ++c) {
                    // The same column alone (decode's 1-column tile).
                    std::vector<float> alone(rows, NAN);
                    kernel(k, packed.data(), groups, a.data() + c * as, as, sums.data() + c * (k / q::kQK), k / q::kQK, 1,
                           alone.data(), rows);
                    for (int64_t r = 0; r < rows; ++r) {
                        const float got = y[c * ys + r];
                        if (std::memcmp(&got, &alone[r], sizeof(float)) != 0) ++mismatches;
                        const double ref = t->vec_dot(k, w.data() + r * ws, a.data() + c * as);
                        if (!(std::fabs(got - ref) <= 1e-5 * magnitude(type, w.data() + r * ws, a.data() + c * as, k)))
                            ++out_of_tolerance;
                    }
                    for (size_t r = rows; r < ys; ++r) CHECK(std::isnan(y[c * ys + r]));  // padding untouched
                }
                CHECK(out_of_tolerance == 0);
                CHECK(mismatches == 0);
            }
        }
    }
}

TEST_CASE("CPU matmul of a repacked matrix: each token of a batch equals the token alone", "[repack]") {
    cpu::CpuBackend be(2);
    std::mt19937 rng(13);
    using deskside::backends::make_tensor;
    for (TypeId type : kRepackTypes) {
        // 37 rows: 4 groups and 5 plain tail rows; 70 tokens span two 64-token task blocks.
        const int64_t k = 4 * q::type_info(type).block_size, rows = 37, m = 70;
        INFO(q::type_info(type).name);
        const auto w = weight_rows(type, k, rows, false, rng);
        auto wbuf = be.map_weight_matrix(w.data(), type, k, rows);
        const auto wt = make_tensor(wbuf.get(), 0, type, k, rows);
        const auto xv = gaussian(static_cast<size_t>(k * m), rng, 1.0f);
        auto xbuf = be.alloc(xv.size() * sizeof(float)), ybuf = be.alloc(rows * m * sizeof(float));
        be.upload(*xbuf, 0, xv.data(), xv.size() * sizeof(float));
        be.matmul(wt, make_tensor(xbuf.get(), 0, TypeId::F32, k, m), make_tensor(ybuf.get(), 0, TypeId::F32, rows, m));
        std::vector<float> batch(rows * m);
        be.download(*ybuf, 0, batch.data(), batch.size() * sizeof(float));
        const q::QuantTraits* t = q::quant_traits(type);
        const size_t as = q::row_bytes(t->vec_dot_type, k);
        std::vector<uint8_t> a(as);
        int mismatches = 0, out_of_tolerance = 0;
        for (int64_t j = 0; j < m; ++j) {
            auto one = be.alloc(rows * sizeof(float));
            be.matmul(wt, make_tensor(xbuf.get(), j * k * sizeof(float), TypeId::F32, k, 1), make_tensor(one.get(), 0, TypeId::F32, rows, 1));
            std::vector<float> alone(rows);
            be.download(*one, 0, alone.data(), rows * sizeof(float));
            q::activation_from_float(t->vec_dot_type)(xv.data() + j * k, a.data(), k);
            for (int64_t r = 0; r < rows; ++r) {
                if (std::memcmp(&alone[r], &batch[j * rows + r], sizeof(float)) != 0) ++mismatches;
                const double ref = t->vec_dot(k, w.data() + r * q::row_bytes(type, k), a.data());
                if (!(std::fabs(alone[r] - ref) <= 1e-5 * magnitude(type, w.data() + r * q::row_bytes(type, k), a.data(), k)))
                    ++out_of_tolerance;
            }
        }
        CHECK(mismatches == 0);
        CHECK(out_of_tolerance == 0);
    }
}
