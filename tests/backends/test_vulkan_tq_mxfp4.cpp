// The Vulkan get_rows and matmul on TQ1_0, TQ2_0 and MXFP4 weights (dequant.glsl, weight_levels.glsl,
// matmul_q8k.comp for the ternary types, matmul_q8.comp for MXFP4) against quant/ and the CPU backend:
// - get_rows: bit-identical to quant::to_float;
// - matmul, on a device with shaderFloat64 (the _exact variants, lavapipe): bit-identical to the
//   CPU backend (these types have AVX2 kernels only, so every CPU level above scalar gives the
//   AVX2 bits the shaders follow); without it (DESKSIDE_VULKAN_DISABLE=fp64): within both sides'
//   float summation, 2 (k/32 + 8) 2^-24 sum |w_i x_i| of the CPU's result;
// - a column's outputs are the same bits whether it is multiplied alone or in a batch;
// with and without 16-bit storage and integer dot products, on quantized Gaussians, random block
// bytes (TQ1_0 bytes above 242, TQ2_0 fields of 3, MXFP4 scales 2^-13 .. 2^7; E8M0 exponents 0 and
// 1 are float subnormals, which a device may flush, so they are left out) and on gpt-oss's MXFP4
// expert stack [256, 256, 8] multiplied as one [256, 2048] matrix. MXFP4 rows of 9 blocks (153
// bytes) put rows and blocks at odd addresses. Without a Vulkan device each test WARNs and returns.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dot_kernels.h"
#include "kernel_test_data.h"
#include "models/gguf.h"
#include "op_harness.h"
#include "quant/activation_quant.h"
#include "quant/float16.h"
#include "support/index_args.h"
#include "support/paths.h"
#include "support/scoped_env.h"

namespace deskside::backends {
namespace {

using quant::TypeId;
using test::DeviceTensor;
using test::ScopedEnv;

struct Case {
    TypeId type;
    int64_t k, n;
    std::vector<uint8_t> bytes;
};

// Random block bytes with finite scales of a sane size (see the file comment).
std::vector<uint8_t> random_blocks(TypeId type, int64_t k, int64_t n, std::mt19937& rng) {
    std::vector<uint8_t> data(quant::row_bytes(type, k) * n);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    const size_t bb = quant::type_info(type).block_bytes;
    std::uniform_real_distribution<float> mag(0.001f, 0.05f);
    for (size_t at = 0; at < data.size(); at += bb) {
        if (type == TypeId::MXFP4) {
            data[at] = static_cast<uint8_t>(114 + rng() % 21);
        } else {
            const uint16_t d = quant::fp32_to_fp16((rng() & 1 ? -1.0f : 1.0f) * mag(rng));
            std::memcpy(data.data() + at + bb - 2, &d, 2);
        }
    }
    return data;
}

std::vector<Case> cases() {
    std::mt19937 rng(31);
    std::vector<Case> out;
    for (TypeId type : {TypeId::TQ1_0, TypeId::TQ2_0, TypeId::MXFP4}) {
        const int64_t k = 768, n = 37;
        out.push_back({type, k, n, test::weight_rows(type, k, n, false, rng)});
        out.push_back({type, k, n, random_blocks(type, k, n, rng)});
    }
    out.push_back({TypeId::MXFP4, 9 * 32, 21, test::weight_rows(TypeId::MXFP4, 9 * 32, 21, false, rng)});
    const auto file = models::GgufFile::open(test::shared_path("models/synth-gptoss-mxfp4_moe.gguf"));
    const auto* t = file.find_tensor("blk.1.ffn_down_exps.weight");
    REQUIRE(t != nullptr);
    REQUIRE(t->type == TypeId::MXFP4);
    out.push_back({TypeId::MXFP4, t->shape[0], t->shape[1] * t->shape[2], {t->data, t->data + t->n_bytes}});
    return out;
}

// y = W x on `be` with W mapped as the engine maps weights.
std::vector<float> matmul_on(Backend& be, const Case& c, const std::vector<float>& x, int64_t m) {
    auto wbuf = be.map_weight_matrix(c.bytes.data(), c.type, c.k, c.n);
    DeviceTensor xt(be, TypeId::F32, c.k, m, x);
    DeviceTensor yt(be, TypeId::F32, c.n, m);
    be.matmul(make_tensor(wbuf.get(), 0, c.type, c.k, c.n), xt.t(), yt.t());
    CHECK(yt.guard_intact());
    return yt.values();
}

// Sum over k of |w_i x_i| for output (row r, column j), x quantized as the CPU quantizes it.
std::vector<double> magnitudes(const Case& c, const std::vector<float>& x, int64_t m) {
    std::vector<float> wd(static_cast<size_t>(c.k * c.n)), xd(static_cast<size_t>(c.k));
    quant::quant_traits(c.type)->to_float(c.bytes.data(), wd.data(), c.k * c.n);
    const TypeId act = quant::quant_traits(c.type)->vec_dot_type;
    std::vector<uint8_t> xq(quant::row_bytes(act, c.k));
    std::vector<double> out(static_cast<size_t>(c.n * m));
    for (int64_t j = 0; j < m; ++j) {
        quant::activation_from_float(act)(x.data() + j * c.k, xq.data(), c.k);
        quant::quant_traits(act)->to_float(xq.data(), xd.data(), c.k);
        for (int64_t r = 0; r < c.n; ++r) {
            double s = 0;
            for (int64_t i = 0; i < c.k; ++i) s += std::fabs(double(wd[r * c.k + i]) * xd[i]);
            out[j * c.n + r] = s;
        }
    }
    return out;
}

}  // namespace

TEST_CASE("vulkan get_rows and matmul on ternary and MXFP4 weights against quant/ and the CPU", "[vulkan]") {
    if (!test::vulkan_or_skip()) return;
    if (cpu::selected_isa() == cpu::CpuIsa::Scalar) {
        WARN("SKIPPED: the CPU backend runs the scalar references; vulkan0 follows its AVX2 kernels");
        return;
    }
    const std::vector<Case> all = cases();
    cpu::CpuBackend cpu(2);
    for (const char* disabled : {"", "storage16,int8-dot", "fp64"}) {
        const ScopedEnv env("DESKSIDE_VULKAN_DISABLE", disabled);
        auto vk = test::vulkan_or_skip();
        REQUIRE(vk);
        bool exact = false;
        for (const DeviceInfo& d : list_devices())
            if (d.api == "vulkan" && d.name == vk->name())
                exact = std::find(d.features.begin(), d.features.end(), "fp64") != d.features.end();
        for (const Case& c : all) {
            INFO(quant::type_info(c.type).name << " [" << c.k << ", " << c.n << "], DESKSIDE_VULKAN_DISABLE="
                                               << disabled << (exact ? " (exact variants)" : ""));
            REQUIRE(vk->supports(Op::GetRows, c.type));
            REQUIRE(vk->supports(Op::Matmul, c.type));

            // get_rows
            std::vector<float> wd(static_cast<size_t>(c.k * c.n));
            quant::quant_traits(c.type)->to_float(c.bytes.data(), wd.data(), c.k * c.n);
            const std::vector<int32_t> ids{static_cast<int32_t>(c.n - 1), 0, 5, static_cast<int32_t>(c.n / 2)};
            {
                auto wbuf = vk->map_weight_matrix(c.bytes.data(), c.type, c.k, c.n);
                DeviceTensor dst(*vk, TypeId::F32, c.k, static_cast<int64_t>(ids.size()));
                vk->get_rows(make_tensor(wbuf.get(), 0, c.type, c.k, c.n), test::index_tensor(*vk, ids), dst.t());
                const std::vector<float> rows = dst.values();
                for (size_t i = 0; i < ids.size(); ++i)
                    CHECK(std::memcmp(rows.data() + i * c.k, wd.data() + ids[i] * c.k, c.k * sizeof(float)) == 0);
                CHECK(dst.guard_intact());
            }

            // matmul: decode (1 column) and prompt (6 columns), against the CPU
            const int64_t m = 6;
            const std::vector<float> x = test::random_values(static_cast<size_t>(c.k * m), 5, -3.0f, 3.0f);
            const std::vector<float> want = matmul_on(cpu, c, x, m);
            const std::vector<float> got = matmul_on(*vk, c, x, m);
            const std::vector<float> x3(x.begin() + 3 * c.k, x.begin() + 4 * c.k);
            const std::vector<float> alone = matmul_on(*vk, c, x3, 1);
            CHECK(std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); }));
            CHECK(std::memcmp(alone.data(), got.data() + 3 * c.n, c.n * sizeof(float)) == 0);
            if (exact) {
                int64_t differing = 0;
                for (size_t i = 0; i < got.size(); ++i) differing += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
                CHECK(differing == 0);
            } else {
                const std::vector<double> mag = magnitudes(c, x, m);
                double worst = 0;
                for (size_t i = 0; i < got.size(); ++i) {
                    const double bound = 2 * (double(c.k) / 32 + 8) * std::ldexp(1.0, -24) * mag[i];
                    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / bound);
                }
                INFO("worst |vulkan - cpu| / allowed = " << worst);
                CHECK(worst <= 1.0);
            }
        }
    }
}

}  // namespace deskside::backends
