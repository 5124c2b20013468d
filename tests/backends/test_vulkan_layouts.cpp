// Pins the block layouts the Vulkan shaders read (backends/vulkan/shaders/dequant.glsl) to
// quant/blocks.h: for every quantized weight type, shaders/dequant_layout.comp reads each field of
// the second of two random blocks through dequant.glsl's offsets and accessors, and the values
// must equal the C++ struct's fields (block size included), so neither side can drift alone.
// Needs the backend's recording interface, so it is compiled only with the Vulkan backend; without
// a Vulkan device it WARNs and returns.
#include <catch2/catch.hpp>

#if DESKSIDE_HAS_VULKAN

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_matmul.h"
#include "op_harness.h"
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

}  // namespace deskside::backends

#else

TEST_CASE("vulkan shaders read every block field where quant/blocks.h puts it", "[vulkan]") {
    WARN("SKIPPED: this build has no Vulkan backend (DESKSIDE_VULKAN=OFF)");
}

#endif
