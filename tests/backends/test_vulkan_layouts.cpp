// Pins the block layouts the Vulkan shaders read (backends/vulkan/shaders/dequant.glsl) to
// quant/blocks.h: for every quantized weight type, shaders/dequant_layout.comp reads each field of
// the second of two random blocks through dequant.glsl's offsets and accessors, and the values
// must equal the C++ struct's fields (block size included), so neither side can drift alone.
// Likewise the integer-dot matmul's activation quantizer (shaders/act_quant.glsl, through
// act_quant_probe.comp) must write the CPU quantizers' bytes (quant::activation_from_float).
// Needs the backend's recording interface, so it is compiled only with the Vulkan backend; without
// a Vulkan device it WARNs and returns.
#include <catch2/catch.hpp>

#if DESKSIDE_HAS_VULKAN

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_matmul.h"
#include "op_harness.h"
#include "quant/activation_quant.h"
#include "quant/blocks.h"

namespace deskside::backends {
namespace {

using quant::TypeId;

template <class Block>
const Block& second_block(const std::vector<uint8_t>& bytes) {
    return *reinterpret_cast<const Block*>(bytes.data() + sizeof(Block));
}

uint32_t u32_of(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// What dequant_layout.comp must write for two blocks `bytes` of a type, in its order:
// block bytes, elements per block, then each field's first and last element.
struct Layout {
    TypeId type;
    size_t block_bytes;
    int block_elems;
    std::function<std::vector<uint32_t>(const std::vector<uint8_t>&)> fields;
};

const std::vector<Layout>& layouts() {
    using namespace quant;
    static const std::vector<Layout> kLayouts{
        {TypeId::Q4_0, sizeof(BlockQ4_0), kQK,
         [](const auto& b) { const auto& x = second_block<BlockQ4_0>(b); return std::vector<uint32_t>{x.d, x.qs[0], x.qs[15]}; }},
        {TypeId::IQ4_NL, sizeof(BlockIq4Nl), kQK,
         [](const auto& b) { const auto& x = second_block<BlockIq4Nl>(b); return std::vector<uint32_t>{x.d, x.qs[0], x.qs[15]}; }},
        {TypeId::Q4_1, sizeof(BlockQ4_1), kQK,
         [](const auto& b) {
             const auto& x = second_block<BlockQ4_1>(b);
             return std::vector<uint32_t>{x.d, x.m, x.qs[0], x.qs[15]};
         }},
        {TypeId::Q5_0, sizeof(BlockQ5_0), kQK,
         [](const auto& b) {
             const auto& x = second_block<BlockQ5_0>(b);
             return std::vector<uint32_t>{x.d, u32_of(x.qh), x.qs[0], x.qs[15]};
         }},
        {TypeId::Q5_1, sizeof(BlockQ5_1), kQK,
         [](const auto& b) {
             const auto& x = second_block<BlockQ5_1>(b);
             return std::vector<uint32_t>{x.d, x.m, u32_of(x.qh), x.qs[0], x.qs[15]};
         }},
        {TypeId::Q8_0, sizeof(BlockQ8_0), kQK,
         [](const auto& b) {
             const auto& x = second_block<BlockQ8_0>(b);
             return std::vector<uint32_t>{x.d, static_cast<uint8_t>(x.qs[0]), static_cast<uint8_t>(x.qs[31])};
         }},
        {TypeId::Q2_K, sizeof(BlockQ2_K), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockQ2_K>(b);
             return std::vector<uint32_t>{x.scales[0], x.scales[15], x.qs[0], x.qs[63], x.d, x.dmin};
         }},
        {TypeId::Q3_K, sizeof(BlockQ3_K), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockQ3_K>(b);
             return std::vector<uint32_t>{x.hmask[0], x.hmask[31], x.qs[0], x.qs[63], x.scales[0], x.scales[11], x.d};
         }},
        {TypeId::Q4_K, sizeof(BlockQ4_K), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockQ4_K>(b);
             return std::vector<uint32_t>{x.d, x.dmin, x.scales[0], x.scales[11], x.qs[0], x.qs[127]};
         }},
        {TypeId::Q5_K, sizeof(BlockQ5_K), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockQ5_K>(b);
             return std::vector<uint32_t>{x.d, x.dmin, x.scales[0], x.scales[11], x.qh[0], x.qh[31], x.qs[0], x.qs[127]};
         }},
        {TypeId::Q6_K, sizeof(BlockQ6_K), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockQ6_K>(b);
             return std::vector<uint32_t>{x.ql[0], x.ql[127], x.qh[0], x.qh[63], static_cast<uint8_t>(x.scales[0]),
                                          static_cast<uint8_t>(x.scales[15]), x.d};
         }},
        {TypeId::IQ4_XS, sizeof(BlockIq4Xs), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockIq4Xs>(b);
             return std::vector<uint32_t>{x.d, x.scales_h, x.scales_l[0], x.scales_l[3], x.qs[0], x.qs[127]};
         }},
        {TypeId::TQ1_0, sizeof(BlockTq1_0), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockTq1_0>(b);
             return std::vector<uint32_t>{x.qs[0], x.qs[47], x.qh[0], x.qh[3], x.d};
         }},
        {TypeId::TQ2_0, sizeof(BlockTq2_0), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockTq2_0>(b);
             return std::vector<uint32_t>{x.qs[0], x.qs[63], x.d};
         }},
        {TypeId::MXFP4, sizeof(BlockMxfp4), kQK,
         [](const auto& b) {
             const auto& x = second_block<BlockMxfp4>(b);
             return std::vector<uint32_t>{x.e, x.qs[0], x.qs[15], u32_of(x.qs + 3)};
         }},
        {TypeId::IQ2_XXS, sizeof(BlockIq2Xxs), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockIq2Xxs>(b);
             return std::vector<uint32_t>{x.d, x.qs[0], x.qs[31]};
         }},
        {TypeId::IQ2_XS, sizeof(BlockIq2Xs), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockIq2Xs>(b);
             return std::vector<uint32_t>{x.d, x.qs[0], x.qs[31], x.scales[0], x.scales[7]};
         }},
        {TypeId::IQ2_S, sizeof(BlockIq2S), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockIq2S>(b);
             return std::vector<uint32_t>{x.d,     x.qs[0],     x.qs[31],    x.qs[32], x.qs[63],
                                          x.qh[0], x.qh[7], x.scales[0], x.scales[7]};
         }},
        {TypeId::IQ3_XXS, sizeof(BlockIq3Xxs), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockIq3Xxs>(b);
             return std::vector<uint32_t>{x.d, x.qs[0], x.qs[63], u32_of(x.qs + 64), u32_of(x.qs + 92)};
         }},
        {TypeId::IQ3_S, sizeof(BlockIq3S), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockIq3S>(b);
             return std::vector<uint32_t>{x.d,        x.qs[0],     x.qs[63],     x.qh[0], x.qh[7],
                                          x.signs[0], x.signs[31], x.scales[0], x.scales[3]};
         }},
        {TypeId::IQ1_S, sizeof(BlockIq1S), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockIq1S>(b);
             return std::vector<uint32_t>{x.d, x.qs[0], x.qs[31], x.qh[0], x.qh[7]};
         }},
        {TypeId::IQ1_M, sizeof(BlockIq1M), kQKK,
         [](const auto& b) {
             const auto& x = second_block<BlockIq1M>(b);
             return std::vector<uint32_t>{x.qs[0], x.qs[31], x.qh[0], x.qh[15], x.scales[0] | x.scales[1] << 8u,
                                          x.scales[6] | x.scales[7] << 8u};
         }},
    };
    return kLayouts;
}

}  // namespace

TEST_CASE("vulkan shaders read every block field where quant/blocks.h puts it", "[vulkan]") {
    auto be = test::vulkan_or_skip();
    if (!be) return;
    auto* vk = dynamic_cast<vulkan::VulkanBackend*>(be.get());
    REQUIRE(vk);
    std::mt19937 rng(42);
    for (const Layout& l : layouts()) {
        INFO(quant::type_info(l.type).name);
        REQUIRE(quant::type_info(l.type).block_bytes == l.block_bytes);
        std::vector<uint8_t> blocks(2 * l.block_bytes);
        for (uint8_t& b : blocks) b = static_cast<uint8_t>(rng());
        std::vector<uint32_t> expected{static_cast<uint32_t>(l.block_bytes), static_cast<uint32_t>(l.block_elems)};
        for (uint32_t v : l.fields(blocks)) expected.push_back(v);

        auto in = vk->alloc(blocks.size() + 2);  // 2 spare bytes: whole words
        vk->upload(*in, 0, blocks.data(), blocks.size());
        const size_t out_bytes = 4 * expected.size();
        auto out = vk->alloc(out_bytes);
        const Tensor blocks_t = make_tensor(in.get(), 0, l.type, 2 * l.block_elems, 1);
        const Tensor probe_t = make_tensor(out.get(), 0, TypeId::F32, static_cast<int64_t>(expected.size()), 1);
        const auto& pipe = vk->pipeline(std::string("dequant_layout_") + vulkan::vulkan_type_suffix(l.type), 2, 0);
        vk->dispatch(pipe, {vk->bind(blocks_t, vulkan::Access::Read), vk->bind(probe_t, vulkan::Access::Write)}, nullptr,
                     vulkan::Groups{1, 1});
        std::vector<uint32_t> got(expected.size());
        vk->download(*out, 0, got.data(), out_bytes);
        CHECK(got == expected);
    }
}

TEST_CASE("vulkan activation quantizers write the CPU's Q8_0, Q8_1 and Q8_K bytes", "[vulkan]") {
    auto be = test::vulkan_or_skip();
    if (!be) return;
    auto* vk = dynamic_cast<vulkan::VulkanBackend*>(be.get());
    REQUIRE(vk);
    // Blocks of random values at magnitudes from 2^-40 to 2^25 (F16 subnormal and overflowing
    // scales included), blocks whose products x * 127 / amax are exact ties (127 / amax = 1 and
    // 2), a zero block and a block led by a negative value.
    constexpr int kBlock = quant::kQK;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), exponent(-40.0f, 25.0f);
    std::vector<float> x;
    for (int b = 0; b < 4000; ++b) {
        const float scale = std::exp2(exponent(rng));
        for (int j = 0; j < kBlock; ++j) x.push_back(unit(rng) * scale);
    }
    for (const float amax : {127.0f, 63.5f}) {
        x.push_back(amax);
        for (int j = 1; j < kBlock; ++j) x.push_back(static_cast<float>(j - 16) * (amax / 127.0f) + 0.5f * (amax / 127.0f));
    }
    for (int j = 0; j < kBlock; ++j) x.push_back(0.0f);
    for (int j = 0; j < kBlock; ++j) x.push_back(j == 3 ? -2.5f : 0.01f * static_cast<float>(j));
    const int n_blocks = static_cast<int>(x.size()) / kBlock;

    auto in = vk->alloc(x.size() * 4);
    vk->upload(*in, 0, x.data(), x.size() * 4);
    auto out = vk->alloc(static_cast<size_t>(n_blocks) * 11 * 4);
    const Tensor x_t = make_tensor(in.get(), 0, TypeId::F32, static_cast<int64_t>(x.size()), 1);
    const Tensor probe_t = make_tensor(out.get(), 0, TypeId::F32, int64_t{n_blocks} * 11, 1);
    const auto& pipe = vk->pipeline("act_quant_probe", 2, 8);
    for (const TypeId type : {TypeId::Q8_0, TypeId::Q8_1}) {
        INFO(quant::type_info(type).name);
        const bool q8_1 = type == TypeId::Q8_1;
        const uint32_t push[2] = {static_cast<uint32_t>(n_blocks), q8_1 ? 1u : 0u};  // probe mode
        vk->dispatch(pipe, {vk->bind(x_t, vulkan::Access::Read), vk->bind(probe_t, vulkan::Access::Write)}, push,
                     vulkan::Groups{static_cast<uint32_t>((n_blocks + 63) / 64), 1});
        std::vector<uint32_t> got(static_cast<size_t>(n_blocks) * 11);
        vk->download(*out, 0, got.data(), got.size() * 4);

        std::vector<uint8_t> cpu(quant::row_bytes(type, static_cast<int64_t>(x.size())));
        quant::activation_from_float(type)(x.data(), cpu.data(), static_cast<int64_t>(x.size()));
        int wrong_levels = 0, wrong_scales = 0, wrong_quotients = 0;
        for (int b = 0; b < n_blocks; ++b) {
            const uint32_t* g = got.data() + 11 * b;
            const int8_t* qs;
            uint32_t scales;
            if (q8_1) {
                const auto& blk = reinterpret_cast<const quant::BlockQ8_1*>(cpu.data())[b];
                qs = blk.qs;
                scales = blk.d | (uint32_t{blk.s} << 16);
            } else {
                const auto& blk = reinterpret_cast<const quant::BlockQ8_0*>(cpu.data())[b];
                qs = blk.qs;
                scales = blk.d;
            }
            wrong_levels += std::memcmp(g, qs, kBlock) != 0;
            wrong_scales += g[8] != scales;
            float amax = 0;
            for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(b) * kBlock + j]));
            const float id = amax != 0 ? 127.f / amax : 0.0f, d = amax / 127.f;
            wrong_quotients += std::memcmp(&g[9], &id, 4) != 0 || std::memcmp(&g[10], &d, 4) != 0;
        }
        CHECK(wrong_levels == 0);
        CHECK(wrong_scales == 0);
        CHECK(wrong_quotients == 0);
    }

    // Q8_K over the same values in blocks of 256, plus one whose largest magnitude appears with
    // both signs (the first one sets the sign).
    for (int j = 0; j < quant::kQKK; ++j) x.push_back(j == 7 ? -3.0f : j == 9 ? 3.0f : 0.001f * static_cast<float>(j));
    // And one led by 3 (iscale = -127 / 3, inexact) whose other values are the floats next to
    // level halves where the rounded product lands on the other side of the half than the exact
    // one (the levels where fused and unfused rounding differ).
    {
        const float iscale = -127.0f / 3.0f;
        std::vector<float> block = {3.0f};
        for (int level = -120; level < 120 && block.size() < static_cast<size_t>(quant::kQKK); ++level) {
            // The 64 floats around the value whose product is the half, in increasing order.
            float v = (static_cast<float>(level) + 0.5f) / iscale;
            for (int step = 0; step < 32; ++step) v = std::nextafter(v, -10.0f);
            for (int step = 0; step < 64 && block.size() < static_cast<size_t>(quant::kQKK); ++step) {
                v = std::nextafter(v, 10.0f);
                const volatile float product = iscale * v;  // rounded, not fused
                const float unfused = std::nearbyint(product);
                const float fused = std::fma(iscale, v, 12582912.0f) - 12582912.0f;
                if (unfused != fused) block.push_back(v);
            }
        }
        while (block.size() < static_cast<size_t>(quant::kQKK)) block.push_back(0.0f);
        x.insert(x.end(), block.begin(), block.end());
    }
    const int n_k = static_cast<int>(x.size()) / quant::kQKK;
    auto in_k = vk->alloc(static_cast<size_t>(n_k) * quant::kQKK * 4);
    vk->upload(*in_k, 0, x.data() + x.size() - static_cast<size_t>(n_k) * quant::kQKK, static_cast<size_t>(n_k) * quant::kQKK * 4);
    const std::vector<float> xk(x.end() - static_cast<std::ptrdiff_t>(n_k) * quant::kQKK, x.end());
    auto out_k = vk->alloc(static_cast<size_t>(n_k) * 66 * 4);
    const Tensor xk_t = make_tensor(in_k.get(), 0, TypeId::F32, static_cast<int64_t>(xk.size()), 1);
    const Tensor probe_k = make_tensor(out_k.get(), 0, TypeId::F32, int64_t{n_k} * 66, 1);
    const uint32_t push[2] = {static_cast<uint32_t>(n_k), 2u};
    vk->dispatch(pipe, {vk->bind(xk_t, vulkan::Access::Read), vk->bind(probe_k, vulkan::Access::Write)}, push,
                 vulkan::Groups{static_cast<uint32_t>((n_k + 63) / 64), 1});
    std::vector<uint32_t> got(static_cast<size_t>(n_k) * 66);
    vk->download(*out_k, 0, got.data(), got.size() * 4);
    std::vector<quant::BlockQ8_K> cpu(n_k);
    quant::activation_from_float(TypeId::Q8_K)(xk.data(), cpu.data(), static_cast<int64_t>(xk.size()));
    int wrong = 0, fused_differs = 0;
    for (int b = 0; b < n_k; ++b) {
        const uint32_t* g = got.data() + 66 * b;
        float max = 0;
        for (int j = 0; j < quant::kQKK; ++j)
            if (std::fabs(xk[static_cast<size_t>(b) * quant::kQKK + j]) > std::fabs(max)) max = xk[static_cast<size_t>(b) * quant::kQKK + j];
        const float iscale = max != 0 ? -127.f / max : 0.0f;
        // Levels where rounding the exact product (an FMA with nearest_int's magic number, as
        // the CPU's AVX2 quantizer did until GCC's contraction was undone) would differ from the
        // reference's, which rounds the product first, as llama.cpp does.
        for (int j = 0; j < quant::kQKK; ++j) {
            const float shifted = std::fma(iscale, xk[static_cast<size_t>(b) * quant::kQKK + j], 12582912.0f);
            fused_differs += std::min(127, static_cast<int>(shifted - 12582912.0f)) != cpu[b].qs[j];
        }
        wrong += std::memcmp(g, cpu[b].qs, quant::kQKK) != 0 || std::memcmp(&g[64], &cpu[b].d, 4) != 0 ||
                 std::memcmp(&g[65], &iscale, 4) != 0;
    }
    INFO("Q8_K blocks: " << n_k << ", levels where a fused rounding would differ: " << fused_differs);
    CHECK(wrong == 0);
    CHECK(fused_differs > 0);  // the data has products that round across a half
}

}  // namespace deskside::backends

#else

#include <string>

#include "op_harness.h"

namespace {

// A build without the Vulkan backend cannot run these: a skip, or a failure where a Vulkan device
// is required (DESKSIDE_REQUIRE_DEVICES, as CI sets it).
void no_vulkan_backend() {
    for (const std::string& name : deskside::test::required_devices())
        if (name.rfind("vulkan", 0) == 0)
            FAIL("DESKSIDE_REQUIRE_DEVICES names " << name
                                                   << " but this build has no Vulkan backend (DESKSIDE_VULKAN=OFF)");
    WARN("SKIPPED: this build has no Vulkan backend (DESKSIDE_VULKAN=OFF)");
}

}  // namespace

TEST_CASE("vulkan shaders read every block field where quant/blocks.h puts it", "[vulkan]") { no_vulkan_backend(); }

TEST_CASE("vulkan activation quantizers write the CPU's Q8_0, Q8_1 and Q8_K bytes", "[vulkan]") { no_vulkan_backend(); }

#endif
