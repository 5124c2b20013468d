// The CUDA matmul's warp schedule (backends/cuda/device/exact_warp_row.cuh: a warp per weight row,
// used for m <= 8 and by matmul_id), run on the host as its model warp_row_dot_model (the 32
// threads' integers computed by the kernel's own functions, the shuffles read from the other
// threads' values), gives every output the bits of exact_row_dot, the per-row model that
// test_cuda_exact_matmul.cpp holds to the CPU backend's AVX2 bits: so the schedule's block-to-thread
// mapping, its passes (the last one partial, rows shorter than one pass) and its token tiles (n_tok
// below the tile) keep the CPU's order. Every quantized weight type the CUDA matmul takes, chain
// rows and lane rows, compared with memcmp.
#include "quant/strict_fp.h"  // first: the device code's float steps must stay unfused here too

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/device/exact_warp_row.cuh"
#include "op_harness.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace deskside::backends {
namespace {

namespace dev = cuda::device;
using quant::TypeId;

struct Count {
    int64_t compared = 0, differing = 0, other_order_differs = 0;
    std::ostringstream first;
};

// Every output of rows x tokens for a tile of kTokens holding n_tok tokens.
template <class T, int kTokens>
void check_tile(const std::vector<uint8_t>& w, const std::vector<uint8_t>& act, size_t act_stride, int64_t n_blocks,
                int64_t n_rows, int n_tok, Count& count) {
    using Block = typename T::Block;
    using ActBlock = typename T::ActBlock;
    const size_t w_row = w.size() / n_rows;
    for (int64_t r = 0; r < n_rows; ++r) {
        const auto* wr = reinterpret_cast<const Block*>(w.data() + r * w_row);
        for (const bool chain : {false, true}) {
            float got[kTokens];
            dev::warp_row_dot_model<T::kType, kTokens>(wr, act.data(), act_stride, n_tok, static_cast<int>(n_blocks),
                                                       chain, got);
            for (int t = 0; t < n_tok; ++t) {
                const auto* at = reinterpret_cast<const ActBlock*>(act.data() + t * act_stride);
                const float want = dev::exact_row_dot<T::kType>(wr, at, n_blocks, chain);
                const float other = dev::exact_row_dot<T::kType>(wr, at, n_blocks, !chain);
                ++count.compared;
                if (std::memcmp(&want, &got[t], sizeof want) != 0 && ++count.differing <= 3)
                    count.first << " blocks " << n_blocks << " tile " << kTokens << " n_tok " << n_tok << " row " << r
                                << " chain " << chain << " token " << t << ": " << want << " vs " << got[t] << ";";
                count.other_order_differs += std::memcmp(&want, &other, sizeof want) != 0;
            }
        }
    }
}

template <class T>
void check_type(uint32_t& seed, int64_t& total) {
    Count count;
    constexpr int64_t kPass1 = dev::WarpPass<T::kType, 1>::kBlocks;
    // Rows shorter than one pass, one pass, a partial last pass; 8 tokens of activations.
    for (const int64_t n_blocks : {int64_t{1}, int64_t{3}, kPass1 - 1, kPass1, kPass1 + 1, 2 * kPass1 + 5}) {
        const int64_t k = n_blocks * T::kElems, n_rows = 4, n_tokens = 8;
        const std::vector<uint8_t> w = test::random_weight_rows(T::kType, k, n_rows, ++seed);
        const std::vector<float> x = test::random_values(static_cast<size_t>(k * n_tokens), ++seed, -3.0f, 3.0f);
        const size_t act_stride = quant::row_bytes(T::kActType, k);
        std::vector<uint8_t> act(act_stride * n_tokens);
        for (int64_t t = 0; t < n_tokens; ++t) {
            auto* blocks = reinterpret_cast<typename T::ActBlock*>(act.data() + t * act_stride);
            for (int64_t b = 0; b < k / T::kActElems; ++b)
                dev::quantize_activation(x.data() + t * k + b * T::kActElems, blocks[b]);
        }
        // The launcher's tiles: m = 1 (tile 1), m <= 4 (tile 4), m <= 8 (tile 8).
        check_tile<T, 1>(w, act, act_stride, n_blocks, n_rows, 1, count);
        for (const int n_tok : {3, 4}) check_tile<T, 4>(w, act, act_stride, n_blocks, n_rows, n_tok, count);
        for (const int n_tok : {5, 8}) check_tile<T, 8>(w, act, act_stride, n_blocks, n_rows, n_tok, count);
    }
    const std::string name(quant::type_info(T::kType).name);
    INFO(name << ": " << count.differing << " of " << count.compared << " outputs differ:" << count.first.str());
    CHECK(count.differing == 0);
    INFO(name << ": the other order changes " << count.other_order_differs << " of " << count.compared);
    CHECK(count.other_order_differs > 0);
    total += count.compared;
}

}  // namespace

TEST_CASE("CUDA warp-row matmul schedule: every output has exact_row_dot's bits", "[cuda-device-code]") {
    uint32_t seed = 7000;
    int64_t total = 0;
    int types = 0;
    // Every GGUF type id up to the highest deskside knows; visit_weight_type picks the CUDA matmul's.
    for (uint32_t id = 0; id <= static_cast<uint32_t>(TypeId::MXFP4); ++id) {
        dev::visit_weight_type(static_cast<TypeId>(id), [&](auto traits) {
            using T = decltype(traits);
            if constexpr (!T::kFloat) {
                check_type<T>(seed, total);
                ++types;
            }
        });
    }
    CHECK(types >= 12);
    WARN("warp schedule: " << total << " outputs of " << types << " weight types compared bit for bit");
}

}  // namespace deskside::backends
