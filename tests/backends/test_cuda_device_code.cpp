// The CUDA kernels' __host__ __device__ block code (backends/cuda/device/*.cuh), compiled here by
// the host compiler as plain C++ and checked against quant/, which we did not write for the GPU:
// - every helper that must be bit-exact is: half / bfloat16 conversions (all 65536 inputs one
//   way, a 1/97 stride of all floats the other), the packed-scale accessors, the IQ4 codebook,
//   the correctly rounded exp (against backends/exp_rounded.h), dp4a's fallback;
// - dequantize() of random blocks writes quant::to_float's bits, for every weight type;
// - quantize_activation() writes quant::activation_from_float's bytes (Q8_0, Q8_1, Q8_K, F16,
//   BF16), on Gaussians, zero blocks and rounding ties;
// - block_dot() of one block equals the scalar reference vec_dot over that block exactly, and
//   the per-block contributions summed in ascending block order from 0.0f equal the reference
//   over a whole row exactly (the reference sums in that order too);
// - the kernels' order (lane partition + butterfly, combine_lanes) differs from the reference
//   only by float reordering: within 1e-5 of the sum of |contributions| (quantized types) or of
//   |w_i a_i| (F32 / F16 / BF16, whose reference accumulates in double);
// - attention's softmax steps (device/attention_math.cuh): one query's positions cut into parts
//   at multiples of kAttentionSplit and merged in order agree with a double-precision softmax
//   within 1e-5 of max |v| (F32 accumulator) or 2e-3 (F16 accumulator, rounded every step), and
//   an attention sink taken after the merge (softmax_add of its logit) joins that softmax's
//   denominator within the same bound;
// - the router (device/moe_math.cuh) chooses the CPU backend's experts, ties included, with its
//   weights within 2^-22 relative (the CPU's libm expf against the correctly rounded exp).
#include "quant/strict_fp.h"  // first: the device code's float steps must stay unfused here too

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/device/attention_math.cuh"
#include "backends/cuda/device/block_dot.cuh"
#include "backends/cuda/device/moe_math.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/exp_rounded.h"
#include "kernel_test_data.h"
#include "quant/activation_quant.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace dev = deskside::backends::cuda::device;
namespace q = deskside::quant;
using q::TypeId;
using namespace deskside::test;

namespace {

constexpr TypeId kWeightTypes[] = {TypeId::F32,  TypeId::F16,  TypeId::BF16, TypeId::Q4_0,   TypeId::Q4_1,
                                   TypeId::Q5_0, TypeId::Q5_1, TypeId::Q8_0, TypeId::IQ4_NL, TypeId::Q2_K,
                                   TypeId::Q3_K, TypeId::Q4_K, TypeId::Q5_K, TypeId::Q6_K,   TypeId::IQ4_XS};

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// A sane random block scale: finite, either sign, small enough that dots stay far from overflow.
uint16_t random_scale(std::mt19937& rng) {
    std::uniform_real_distribution<float> mag(0.001f, 0.05f);
    return q::fp32_to_fp16((rng() & 1 ? -1.0f : 1.0f) * mag(rng));
}

// Random bytes with every fp16 scale field replaced by a sane value.
void sanitize(q::BlockQ4_0& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockQ4_1& b, std::mt19937& rng) { b.d = random_scale(rng), b.m = random_scale(rng); }
void sanitize(q::BlockQ5_0& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockQ5_1& b, std::mt19937& rng) { b.d = random_scale(rng), b.m = random_scale(rng); }
void sanitize(q::BlockQ8_0& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq4Nl& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockQ2_K& b, std::mt19937& rng) { b.d = random_scale(rng), b.dmin = random_scale(rng); }
void sanitize(q::BlockQ3_K& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockQ4_K& b, std::mt19937& rng) { b.d = random_scale(rng), b.dmin = random_scale(rng); }
void sanitize(q::BlockQ5_K& b, std::mt19937& rng) { b.d = random_scale(rng), b.dmin = random_scale(rng); }
void sanitize(q::BlockQ6_K& b, std::mt19937& rng) { b.d = random_scale(rng); }
void sanitize(q::BlockIq4Xs& b, std::mt19937& rng) { b.d = random_scale(rng); }

// k elements of weights of `type`: random blocks (random_bytes) or quantized Gaussians.
template <class Traits>
std::vector<uint8_t> weight_row(TypeId type, int64_t k, bool random_bytes, std::mt19937& rng) {
    std::vector<uint8_t> row(q::row_bytes(type, k));
    const auto v = gaussian(static_cast<size_t>(k), rng, 1.0f);
    if constexpr (Traits::kFloat) {
        q::quant_traits(type)->from_float(v.data(), row.data(), k);
    } else {
        if (!random_bytes && q::quant_traits(type)->from_float != nullptr) {
            q::quant_traits(type)->from_float(v.data(), row.data(), k);
        } else {
            for (auto& b : row) b = static_cast<uint8_t>(rng());
            auto* blocks = reinterpret_cast<typename Traits::Block*>(row.data());
            for (int64_t i = 0; i < k / Traits::kElems; ++i) sanitize(blocks[i], rng);
        }
    }
    return row;
}

// The dot of a row as the kernels reduce it: lane l sums blocks (or float chunks) l, l + 32, ...
// in order, then combine_lanes. Also returns the sequential sum and the sum of |contribution|.
template <class Traits>
float kernel_order_dot(const uint8_t* w, const uint8_t* a, int64_t k, float* sequential, double* magnitude_sum) {
    float partials[dev::kWarpLanes] = {};
    float seq = 0.0f;
    double mag = 0;
    const int64_t n_blocks = (k + Traits::kElems - 1) / Traits::kElems;
    for (int64_t b = 0; b < n_blocks; ++b) {
        float c;
        if constexpr (Traits::kFloat) {
            const int n = static_cast<int>(std::min<int64_t>(Traits::kElems, k - b * Traits::kElems));
            using E = typename Traits::Element;
            const E* we = reinterpret_cast<const E*>(w) + b * Traits::kElems;
            const E* ae = reinterpret_cast<const E*>(a) + b * Traits::kElems;
            if constexpr (sizeof(E) == 4) c = dev::chunk_dot(we, ae, n);
            else c = dev::chunk_dot(we, ae, n, Traits::kActType == TypeId::BF16);
        } else {
            c = dev::block_dot(reinterpret_cast<const typename Traits::Block*>(w)[b],
                               reinterpret_cast<const typename Traits::ActBlock*>(a)[b]);
        }
        partials[b % dev::kWarpLanes] = dev::add_rn(partials[b % dev::kWarpLanes], c);
        seq = dev::add_rn(seq, c);
        mag += std::fabs(c);
    }
    *sequential = seq;
    *magnitude_sum = mag;
    return dev::combine_lanes(partials);
}

// quant::activation_from_float next to the device quantizer, for the activation type of Traits.
template <class Traits>
std::vector<uint8_t> device_quantize(const float* x, int64_t k) {
    std::vector<uint8_t> out(q::row_bytes(Traits::kActType, k));
    if constexpr (Traits::kFloat) {
        auto* h = reinterpret_cast<uint16_t*>(out.data());
        for (int64_t i = 0; i < k; ++i) {
            if constexpr (Traits::kActType == TypeId::F32) std::memcpy(out.data() + 4 * i, &x[i], 4);
            else if constexpr (Traits::kActType == TypeId::F16) h[i] = dev::quantize_activation_f16(x[i]);
            else h[i] = dev::quantize_activation_bf16(x[i]);
        }
    } else {
        using A = typename Traits::ActBlock;
        constexpr int kActElems = Traits::kActType == TypeId::Q8_K ? q::kQKK : q::kQK;
        auto* blocks = reinterpret_cast<A*>(out.data());
        for (int64_t i = 0; i < k / kActElems; ++i) dev::quantize_activation(x + i * kActElems, blocks[i]);
    }
    return out;
}

}  // namespace

TEST_CASE("CUDA device code: half and bfloat16 conversions are quant/float16.h's", "[cuda-device-code]") {
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto u = static_cast<uint16_t>(h);
        REQUIRE(bits(dev::fp16_to_fp32(u)) == bits(q::fp16_to_fp32(u)));
        REQUIRE(bits(dev::bf16_to_fp32(u)) == bits(q::bf16_to_fp32(u)));
    }
    for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 97) {
        float f;
        const auto u = static_cast<uint32_t>(x);
        std::memcpy(&f, &u, 4);
        REQUIRE(dev::fp32_to_fp16(f) == q::fp32_to_fp16(f));
        REQUIRE(dev::fp32_to_bf16(f) == q::fp32_to_bf16(f));
    }
}

TEST_CASE("CUDA device code: block fields, codebook, exp and dp4a", "[cuda-device-code]") {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 2000; ++trial) {
        uint8_t packed[12];
        for (auto& b : packed) b = static_cast<uint8_t>(rng());
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            int dsc, dm;
            q::k4_scale_min(j, packed, &sc, &m);
            dev::k4_scale_min(j, packed, &dsc, &dm);
            REQUIRE(dsc == sc);
            REQUIRE(dm == m);
        }
        for (int j = 0; j < 16; ++j) REQUIRE(dev::q3k_scale(j, packed) == q::q3k_scale(j, packed));
        const uint32_t a = rng(), b = rng();
        int expect = 5;
        for (int i = 0; i < 4; ++i) expect += int8_t(a >> (8 * i)) * int8_t(b >> (8 * i));
        REQUIRE(dev::dp4a(a, b, 5) == expect);
    }
    for (int i = 0; i < 16; ++i) REQUIRE(dev::iq4_level(i) == q::kIq4nlValues[i]);
    std::uniform_real_distribution<float> arg(-110.0f, 90.0f);
    for (int trial = 0; trial < 200000; ++trial) {
        const float x = arg(rng);
        REQUIRE(bits(dev::exp_rounded(x)) == bits(deskside::backends::exp_rounded(x)));
    }
}

TEST_CASE("CUDA device code: dequantize writes quant::to_float's bits", "[cuda-device-code]") {
    std::mt19937 rng(3);
    constexpr int64_t k = 1024;
    for (TypeId type : kWeightTypes) {
        dev::visit_weight_type(type, [&](auto traits) {
            using T = decltype(traits);
            if constexpr (!T::kFloat) {
                for (bool random_bytes : {false, true}) {
                    INFO(q::type_info(type).name << (random_bytes ? " random bytes" : " quantized"));
                    const auto row = weight_row<T>(type, k, random_bytes, rng);
                    std::vector<float> expect(k), got(k);
                    q::quant_traits(type)->to_float(row.data(), expect.data(), k);
                    const auto* blocks = reinterpret_cast<const typename T::Block*>(row.data());
                    for (int64_t i = 0; i < k / T::kElems; ++i) dev::dequantize(blocks[i], got.data() + i * T::kElems);
                    REQUIRE(std::memcmp(expect.data(), got.data(), k * sizeof(float)) == 0);
                }
            }
        });
    }
}

TEST_CASE("CUDA device code: activation quantization writes quant::activation_from_float's bytes",
          "[cuda-device-code]") {
    std::mt19937 rng(5);
    constexpr int64_t k = 1024;
    for (TypeId type : kWeightTypes) {
        dev::visit_weight_type(type, [&](auto traits) {
            using T = decltype(traits);
            INFO(q::type_info(type).name);
            std::vector<std::vector<float>> rows;
            for (float sigma : {1.0f, 1e-3f, 30.0f}) rows.push_back(gaussian(k, rng, sigma));
            // Zero blocks, a negative extreme, and levels that land exactly on .5 (amax = 127 / 2
            // makes x * 127 / amax = 2x, so x = 0.25 gives 0.5).
            std::vector<float> special(k, 0.0f);
            for (int64_t i = 256; i < 512; ++i) special[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
            special[300] = -63.5f;
            special[600] = 63.5f;
            for (int64_t i = 601; i < 640; ++i) special[i] = 0.25f * static_cast<float>(i % 5);
            rows.push_back(special);
            for (const auto& x : rows) {
                const auto got = device_quantize<T>(x.data(), k);
                std::vector<uint8_t> expect(got.size());
                if (T::kActType == TypeId::F32) std::memcpy(expect.data(), x.data(), expect.size());
                else q::activation_from_float(T::kActType)(x.data(), expect.data(), k);
                REQUIRE(got == expect);
            }
        });
    }
}

TEST_CASE("CUDA device code: block dots reproduce quant's scalar vec_dot", "[cuda-device-code]") {
    std::mt19937 rng(9);
    for (TypeId type : kWeightTypes) {
        dev::visit_weight_type(type, [&](auto traits) {
            using T = decltype(traits);
            const q::QuantTraits* qt = q::quant_traits(type);
            REQUIRE(qt->vec_dot_type == T::kActType);
            // 4096 fills all 32 lanes with 32-element blocks; 4096 + 32 * 3 + 7 leaves a short
            // last chunk for the float types.
            for (int64_t k : {int64_t{256}, int64_t{4096}, int64_t{4096 + 32 * 3 + 7}}) {
                if (!T::kFloat && k % T::kElems != 0) continue;
                for (bool random_bytes : {false, true}) {
                    INFO(q::type_info(type).name << " k=" << k << (random_bytes ? " random bytes" : " quantized"));
                    const auto w = weight_row<T>(type, k, random_bytes, rng);
                    const auto x = gaussian(static_cast<size_t>(k), rng, 1.0f);
                    const auto a = device_quantize<T>(x.data(), k);
                    const float ref = qt->vec_dot(k, w.data(), a.data());
                    float sequential;
                    double mag;
                    const float lanes = kernel_order_dot<T>(w.data(), a.data(), k, &sequential, &mag);
                    if constexpr (T::kFloat) {
                        // The reference sums w_i a_i in double: tolerance from the |terms|.
                        std::vector<float> wd(k), ad(k);
                        qt->to_float(w.data(), wd.data(), k);
                        q::quant_traits(T::kActType)->to_float(a.data(), ad.data(), k);
                        double terms = 0;
                        for (int64_t i = 0; i < k; ++i) terms += std::fabs(double(wd[i]) * ad[i]);
                        REQUIRE(std::fabs(double(lanes) - ref) <= 1e-5 * terms);
                    } else {
                        // Same per-block operations, same order: exact.
                        REQUIRE(bits(sequential) == bits(ref));
                        REQUIRE(std::fabs(double(lanes) - ref) <= 1e-5 * mag);
                        // Each block on its own equals the reference over that block.
                        const size_t wb = sizeof(typename T::Block), ab = sizeof(typename T::ActBlock);
                        for (int64_t b = 0; b < k / T::kElems; ++b) {
                            const float one = dev::block_dot(
                                *reinterpret_cast<const typename T::Block*>(w.data() + b * wb),
                                *reinterpret_cast<const typename T::ActBlock*>(a.data() + b * ab));
                            REQUIRE(bits(one) == bits(qt->vec_dot(T::kElems, w.data() + b * wb, a.data() + b * ab)));
                        }
                    }
                }
            }
        });
    }
}

TEST_CASE("CUDA device code: attention parts merged in order equal one softmax", "[cuda-device-code]") {
    std::mt19937 rng(13);
    constexpr int64_t kDim = 8;
    constexpr int64_t kSplit = deskside::backends::cuda::kAttentionSplit;
    for (int64_t n_pos : {int64_t{1}, int64_t{300}, kSplit, kSplit + 1, 3 * kSplit + 77}) {
        for (int64_t first : {int64_t{0}, n_pos / 3}) {
            for (bool f16 : {false, true}) {
                INFO("positions " << first << ".." << n_pos - 1 << (f16 ? " F16 accumulator" : ""));
                const auto scores = gaussian(static_cast<size_t>(n_pos), rng, 3.0f);
                const auto v = gaussian(static_cast<size_t>(n_pos * kDim), rng, 1.0f);
                // Reference: softmax in double over [first, n_pos).
                double max = -INFINITY;
                for (int64_t p = first; p < n_pos; ++p) max = std::max<double>(max, scores[p]);
                double sum = 0;
                std::vector<double> expect(kDim, 0.0);
                for (int64_t p = first; p < n_pos; ++p) {
                    const double e = std::exp(scores[p] - max);
                    sum += e;
                    for (int64_t d = 0; d < kDim; ++d) expect[d] += e * v[p * kDim + d];
                }
                // As the kernels run it: parts in position order, each an online softmax, then merged.
                dev::SoftmaxState merged;
                std::vector<float> acc(kDim, 0.0f);
                bool any = false;
                for (int64_t part = first / kSplit; part * kSplit < n_pos; ++part) {
                    dev::SoftmaxState st;
                    std::vector<float> pacc(kDim, 0.0f);
                    for (int64_t p = std::max(first, part * kSplit); p < std::min(n_pos, (part + 1) * kSplit); ++p) {
                        const bool moved = scores[p] > st.max;
                        const dev::SoftmaxStep step = dev::softmax_add(st, scores[p]);
                        for (int64_t d = 0; d < kDim; ++d) {
                            pacc[d] = dev::softmax_accumulate(pacc[d], v[p * kDim + d], step, moved, f16);
                        }
                    }
                    if (!any) {
                        merged = st, acc = pacc, any = true;
                        continue;
                    }
                    const dev::MergeFactors f = dev::softmax_merge(merged, st);
                    for (int64_t d = 0; d < kDim; ++d) acc[d] = dev::merge_accumulator(acc[d], pacc[d], f);
                }
                REQUIRE(any);
                REQUIRE(merged.max == static_cast<float>(max));
                const float tol = f16 ? 2e-3f : 1e-5f;
                for (int64_t d = 0; d < kDim; ++d) {
                    REQUIRE(std::fabs(acc[d] / merged.sum - expect[d] / sum) <= tol * 4.0f);  // |v| < ~4 (sigma 1)
                }
            }
        }
    }
}

TEST_CASE("CUDA device code: an attention sink joins the merged softmax's denominator", "[cuda-device-code]") {
    std::mt19937 rng(91);
    std::uniform_real_distribution<float> score(-6.0f, 6.0f), value(-1.0f, 1.0f);
    for (const float sink : {-20.0f, 0.0f, 3.0f, 12.0f}) {
        std::vector<float> s(700), v(700);
        for (size_t i = 0; i < s.size(); ++i) s[i] = score(rng), v[i] = value(rng);
        // Two parts (positions [0, 512) and the rest) merged in order, then the sink.
        dev::SoftmaxState a, b;
        float acc_a = 0, acc_b = 0;
        for (size_t i = 0; i < s.size(); ++i) {
            dev::SoftmaxState& st = i < 512 ? a : b;
            float& acc = i < 512 ? acc_a : acc_b;
            const bool moved = s[i] > st.max;
            const dev::SoftmaxStep step = dev::softmax_add(st, s[i]);
            acc = dev::softmax_accumulate(acc, v[i], step, moved, false);
        }
        const dev::MergeFactors f = dev::softmax_merge(a, b);
        float acc = dev::merge_accumulator(acc_a, acc_b, f);
        acc = dev::mul_rn(acc, dev::softmax_add(a, sink).rescale);
        const float got = dev::mul_rn(acc, dev::div_rn(1.0f, a.sum));
        double mx = sink, z = 0, num = 0;
        for (float x : s) mx = std::max<double>(mx, x);
        z = std::exp(sink - mx);
        for (size_t i = 0; i < s.size(); ++i) {
            const double e = std::exp(s[i] - mx);
            z += e;
            num += e * v[i];
        }
        INFO("sink " << sink);
        CHECK(std::fabs(got - num / z) <= 1e-5);
    }
}

TEST_CASE("CUDA device code: the router chooses the CPU backend's experts with its weights", "[cuda-device-code]") {
    using deskside::backends::MoeGating;
    deskside::backends::cpu::CpuBackend cpu(1);
    const int n_expert = 64, n = 20;
    std::mt19937 rng(92);
    std::uniform_real_distribution<float> dist(-5.0f, 5.0f);
    std::vector<float> logits(static_cast<size_t>(n_expert * n));
    for (float& l : logits) l = dist(rng);
    for (int e : {3, 17, 40}) logits[5 * n_expert + e] = 6.0f;  // exact ties in token 5
    for (const int n_used : {1, 6, n_expert}) {
        for (const MoeGating gating : {MoeGating::SoftmaxThenTopK, MoeGating::TopKThenSoftmax}) {
            for (const bool normalize : {false, true}) {
                INFO("n_used " << n_used << " gating " << static_cast<int>(gating) << " normalize " << normalize);
                auto lb = cpu.alloc(logits.size() * 4), ib = cpu.alloc(static_cast<size_t>(n_used * n) * 4),
                     wb = cpu.alloc(static_cast<size_t>(n_used * n) * 4);
                cpu.upload(*lb, 0, logits.data(), logits.size() * 4);
                const deskside::backends::MoeRouteParams p{n_expert, n_used, gating, normalize};
                cpu.moe_route(deskside::backends::make_tensor(lb.get(), 0, TypeId::F32, n_expert, n), p,
                              deskside::backends::make_tensor(ib.get(), 0, TypeId::I32, n_used, n),
                              deskside::backends::make_tensor(wb.get(), 0, TypeId::F32, n_used, n));
                std::vector<int32_t> cpu_ids(static_cast<size_t>(n_used * n));
                std::vector<float> cpu_w(cpu_ids.size());
                cpu.download(*ib, 0, cpu_ids.data(), cpu_ids.size() * 4);
                cpu.download(*wb, 0, cpu_w.data(), cpu_w.size() * 4);
                std::vector<int32_t> ids(cpu_ids.size());
                std::vector<float> w(cpu_w.size());
                for (int t = 0; t < n; ++t)
                    dev::moe_route_token(logits.data() + t * n_expert, n_expert, n_used,
                                         gating == MoeGating::SoftmaxThenTopK, normalize, ids.data() + t * n_used,
                                         w.data() + t * n_used);
                CHECK(ids == cpu_ids);
                double worst = 0;
                for (size_t i = 0; i < w.size(); ++i)
                    worst = std::max(worst, std::fabs(double{w[i]} - cpu_w[i]) /
                                                std::max(1e-30, std::fabs(double{cpu_w[i]})));
                CHECK(worst <= 1.0 / (1 << 22));
            }
        }
    }
}
