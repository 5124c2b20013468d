// The Vulkan matmul and get_rows for every weight type (backends/vulkan/vk_matmul.h) against
// references we did not compute on the GPU: quant::to_float (the scalar dequantizer, bit-exact
// with llama.cpp), the CPU's activation quantizer (quant::activation_from_float), an exact
// double-precision dot, and the CPU backend, on random blocks and on blocks written by llama.cpp's
// llama-quantize.
//
// Two kinds of kernel, two references:
// - quantized types (integer-dot kernels): activations are quantized to the type's vec_dot_type
//   (Q8_0, Q8_1, Q8_K) with the CPU's bytes, so the reference is llama.cpp's block formula on the
//   CPU-quantized activations: for Q8_0/Q8_1 evaluated exactly (sum over blocks of
//   d_w * d_x * sum(level_w * level_x) (+ m_w * s_x)), for Q8_K quant::ref's float vec_dot (its
//   own rounding, one per super-block and a few, is added to the bound). Against the CPU backend
//   only the float summation of the block terms differs.
// - F32, F16, BF16: activations are rounded to the weight's vec_dot_type (F16, BF16; F32 stays)
//   as the CPU backend and llama.cpp do; the reference is the exact dot of quant::to_float(W) and
//   that rounded x (quant::fp32_to_fp16 / fp32_to_bf16).
//
// Stated tolerances:
// - get_rows: bit-identical to quant::to_float (the shader repeats its float operations).
// - matmul vs the reference: |y - ref| <= (ceil(k/32) + 7) * 2^-24 * sum of |terms| (products
//   w_i x_i, or the scale and min parts of each block term), the worst-case rounding of the
//   shader's summation (each of 32 lanes adds about k/1024 block terms or k/32 products in order,
//   then a 5-level tree; Higham's gamma_n bound for recursive summation, with 3 roundings per
//   block term).
// - matmul vs the CPU backend, quantized types: twice that bound (both sides' summation); F32,
//   F16, BF16: 2 (k + 8) 2^-24 sum of |w_i x_i| (the CPU sums the k products in its own order).
// - integer-dot kernel with and without SPV_KHR_integer_dot_product: bit-identical; every kernel
//   with and without 16-bit storage loads: bit-identical.
// - batch invariance: a column's outputs are bit-identical whatever the number of columns.
// Outputs start as NaN (an output the op skips fails) and are followed by guard bytes. Without a
// Vulkan device each test WARNs and returns.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/scoped_env.h"
#include "backends/cpu/cpu_backend.h"
#include "models/gguf.h"
#include "op_harness.h"
#include "quant/activation_quant.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "support/paths.h"
#include "support/index_args.h"

namespace deskside::backends {
namespace {

using quant::TypeId;
using test::DeviceTensor;
using test::random_values;

// Every weight type the Vulkan backend computes with (issue #5).
constexpr TypeId kTypes[] = {TypeId::F32,  TypeId::F16,  TypeId::BF16, TypeId::Q8_0, TypeId::Q4_0,
                             TypeId::Q4_1, TypeId::Q5_0, TypeId::Q5_1, TypeId::Q2_K, TypeId::Q3_K,
                             TypeId::Q4_K, TypeId::Q5_K, TypeId::Q6_K, TypeId::IQ4_NL, TypeId::IQ4_XS,
                             TypeId::IQ2_XXS, TypeId::IQ2_XS, TypeId::IQ2_S, TypeId::IQ3_XXS, TypeId::IQ3_S,
                             TypeId::IQ1_S, TypeId::IQ1_M};

constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // 2^-24: float's unit roundoff

std::string type_name(TypeId t) { return std::string(quant::type_info(t).name); }

// Row lengths that exercise the tails a type allows: not a multiple of 32 (float types), not a
// multiple of 256 (32-element blocks), and 2304 = 2 full 1024-element shader steps + a partial one.
std::vector<int64_t> row_lengths(TypeId t) {
    switch (quant::type_info(t).block_size) {
        case 1: return {100, 2304};
        case 32: return {96, 2304};
        default: return {512, 2304};
    }
}

// An offset for a weight tensor that is allowed (even; a whole word for F32) but not a multiple
// of the storage-buffer offset alignment, so the shaders' in-binding offsets are exercised.
size_t unaligned_offset(TypeId t) { return quant::type_info(t).block_bytes == 4 ? 20 : 18; }

// n rows of k elements of `type` (the bytes) and what quant::to_float makes of them.
struct Weights {
    TypeId type;
    int64_t k, n;
    std::vector<uint8_t> bytes;
    std::vector<float> values;
    size_t row_bytes() const { return quant::row_bytes(type, k); }
};

Weights make_weights(TypeId type, int64_t k, int64_t n, uint32_t seed) {
    Weights w{type, k, n, std::vector<uint8_t>(quant::row_bytes(type, k) * n), std::vector<float>(k * n)};
    const quant::QuantTraits* traits = quant::quant_traits(type);
    const size_t row = w.row_bytes();
    if (traits->from_float) {
        std::vector<float> v = random_values(k * n, seed);
        for (int64_t r = 0; r < n; ++r) {
            const float scale = 0.05f + 0.1f * static_cast<float>(r % 7);  // rows of different magnitudes
            for (int64_t i = 0; i < k; ++i) v[r * k + i] *= scale;
            traits->from_float(v.data() + r * k, w.bytes.data() + r * row, k);
        }
    } else {
        // The i-quants have no quantizer: random indices and group scales under a small fp16
        // super-block scale (test::set_block_scale).
        static_assert(offsetof(quant::BlockIq4Nl, d) == 0 && offsetof(quant::BlockIq4Xs, d) == 0);
        std::mt19937 rng(seed);
        for (uint8_t& b : w.bytes) b = static_cast<uint8_t>(rng());
        const size_t block = quant::type_info(type).block_bytes;
        std::uniform_real_distribution<float> scale(-0.004f, 0.004f);
        for (size_t at = 0; at < w.bytes.size(); at += block) {
            test::set_block_scale(type, w.bytes.data() + at, quant::fp32_to_fp16(scale(rng)));
        }
    }
    for (int64_t r = 0; r < n; ++r) traits->to_float(w.bytes.data() + r * row, w.values.data() + r * k, k);
    return w;
}

// A tensor with the test's own bytes at `offset` of a buffer, guard bytes after it.
class RawTensor {
   public:
    RawTensor(Backend& be, const Weights& w, size_t offset = 0) : be_(be), offset_(offset) {
        std::vector<uint8_t> bytes(offset + w.bytes.size() + test::kGuardBytes, test::kGuardByte);
        std::memcpy(bytes.data() + offset, w.bytes.data(), w.bytes.size());
        buffer_ = be.alloc(bytes.size());
        be.upload(*buffer_, 0, bytes.data(), bytes.size());
        tensor_ = make_tensor(buffer_.get(), offset, w.type, w.k, w.n);
        end_ = offset + w.bytes.size();
    }
    const Tensor& t() const { return tensor_; }
    bool guard_intact() const {
        std::vector<uint8_t> bytes(buffer_->size());
        be_.download(*buffer_, 0, bytes.data(), bytes.size());
        return std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(end_), bytes.end(),
                           [](uint8_t b) { return b == test::kGuardByte; });
    }

   private:
    Backend& be_;
    size_t offset_, end_ = 0;
    std::unique_ptr<Buffer> buffer_;
    Tensor tensor_;
};

// Types whose Vulkan kernel quantizes activations (shaders/matmul_q8.comp, matmul_q8k.comp):
// every quantized weight type.
bool quantizes_activations(TypeId t) {
    const TypeId act = quant::quant_traits(t)->vec_dot_type;
    return act == TypeId::Q8_0 || act == TypeId::Q8_1 || act == TypeId::Q8_K;
}

// The value of each output (column-major, like y) and the sum of the magnitudes of the terms
// the kernel rounds, for the kernel the type uses (see the top of the file). `exact` is exact
// but for the K-quants, where it is llama.cpp's float vec_dot, whose own rounding adds
// `ref_terms` roundings to the bound.
struct Reference {
    std::vector<double> exact, magnitude;
    int64_t ref_terms = 0;
};

// K-quants and IQ4_XS: quant::ref's vec_dot (llama.cpp's formula and order, in float) on the
// CPU's Q8_K activations. The magnitude sums |d sc q_j x_j| + |dmin m x_j| per element: the
// weights' values with the level bits cleared are the mins alone (-dmin m).
Reference reference_q8k(const Weights& w, const std::vector<float>& x, int64_t m) {
    const int64_t k = w.k;
    Reference ref{std::vector<double>(w.n * m), std::vector<double>(w.n * m), k / quant::kQKK + 4};
    const quant::QuantTraits& traits = *quant::quant_traits(w.type);
    std::vector<uint8_t> no_levels = w.bytes;  // the level bits cleared: mins alone
    const size_t block = quant::type_info(w.type).block_bytes;
    for (size_t at = 0; at < no_levels.size(); at += block) {
        if (w.type == TypeId::Q2_K)
            std::memset(no_levels.data() + at + offsetof(quant::BlockQ2_K, qs), 0, sizeof(quant::BlockQ2_K::qs));
        if (w.type == TypeId::Q4_K)
            std::memset(no_levels.data() + at + offsetof(quant::BlockQ4_K, qs), 0, sizeof(quant::BlockQ4_K::qs));
        if (w.type == TypeId::Q5_K)
            std::memset(no_levels.data() + at + offsetof(quant::BlockQ5_K, qh), 0,
                        sizeof(quant::BlockQ5_K::qh) + sizeof(quant::BlockQ5_K::qs));
    }
    const bool has_mins = w.type == TypeId::Q2_K || w.type == TypeId::Q4_K || w.type == TypeId::Q5_K;
    std::vector<float> mins(k * w.n, 0.0f);
    if (has_mins) traits.to_float(no_levels.data(), mins.data(), k * w.n);
    std::vector<uint8_t> xq(quant::row_bytes(TypeId::Q8_K, k));
    std::vector<float> xd(k);
    for (int64_t c = 0; c < m; ++c) {
        quant::activation_from_float(TypeId::Q8_K)(x.data() + c * k, xq.data(), k);
        quant::quant_traits(TypeId::Q8_K)->to_float(xq.data(), xd.data(), k);
        for (int64_t r = 0; r < w.n; ++r) {
            ref.exact[c * w.n + r] = traits.vec_dot(k, w.bytes.data() + r * w.row_bytes(), xq.data());
            double magnitude = 0;
            for (int64_t i = 0; i < k; ++i) {
                const double min = mins[r * k + i], scaled = static_cast<double>(w.values[r * k + i]) - min;
                magnitude += (std::fabs(scaled) + std::fabs(min)) * std::fabs(xd[i]);
            }
            ref.magnitude[c * w.n + r] = magnitude;
        }
    }
    return ref;
}

// Element j's level (0..15 or 0..31) and the min of block `b` of a Q4_1/Q5_1 row.
int min_type_level(TypeId t, const uint8_t* row, int64_t b, int j, double* m) {
    const size_t bytes = quant::type_info(t).block_bytes;
    const uint8_t* blk = row + b * bytes;
    uint16_t mh;
    std::memcpy(&mh, blk + 2, 2);
    *m = quant::fp16_to_fp32(mh);
    const uint8_t* qs = blk + (t == TypeId::Q4_1 ? offsetof(quant::BlockQ4_1, qs) : offsetof(quant::BlockQ5_1, qs));
    int level = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    if (t == TypeId::Q5_1) {
        uint32_t qh;
        std::memcpy(&qh, blk + offsetof(quant::BlockQ5_1, qh), 4);
        level |= static_cast<int>((qh >> j) & 1) << 4;
    }
    return level;
}

// x as the CPU backend dots it with unquantized weights of `type`: rounded to the type's
// vec_dot_type (F16 for F16 weights, BF16 for BF16, unchanged for F32).
std::vector<float> dot_activations(TypeId type, std::vector<float> x) {
    const TypeId act = quant::quant_traits(type)->vec_dot_type;
    for (float& v : x) {
        if (act == TypeId::F16) v = quant::fp16_to_fp32(quant::fp32_to_fp16(v));
        if (act == TypeId::BF16) v = quant::bf16_to_fp32(quant::fp32_to_bf16(v));
    }
    return x;
}

Reference reference(const Weights& w, const std::vector<float>& x_f32, int64_t m) {
    const int64_t k = w.k;
    Reference ref{std::vector<double>(w.n * m), std::vector<double>(w.n * m)};
    if (!quantizes_activations(w.type)) {
        const std::vector<float> x = dot_activations(w.type, x_f32);
        for (int64_t c = 0; c < m; ++c)
            for (int64_t r = 0; r < w.n; ++r) {
                double exact = 0, magnitude = 0;
                for (int64_t i = 0; i < k; ++i) {
                    const double p = static_cast<double>(w.values[r * k + i]) * x[c * k + i];
                    exact += p;
                    magnitude += std::fabs(p);
                }
                ref.exact[c * w.n + r] = exact;
                ref.magnitude[c * w.n + r] = magnitude;
            }
        return ref;
    }
    const TypeId act = quant::quant_traits(w.type)->vec_dot_type;
    if (act == TypeId::Q8_K) return reference_q8k(w, x_f32, m);
    const bool with_min = act == TypeId::Q8_1;
    const int64_t n_blocks = k / quant::kQK;
    std::vector<uint8_t> xq(quant::row_bytes(act, k));
    for (int64_t c = 0; c < m; ++c) {
        quant::activation_from_float(act)(x_f32.data() + c * k, xq.data(), k);
        for (int64_t r = 0; r < w.n; ++r) {
            const uint8_t* row = w.bytes.data() + r * w.row_bytes();
            double exact = 0, magnitude = 0;
            for (int64_t b = 0; b < n_blocks; ++b) {
                const int8_t* levels;
                double dx, sx = 0;
                if (with_min) {
                    const auto& blk = reinterpret_cast<const quant::BlockQ8_1*>(xq.data())[b];
                    levels = blk.qs;
                    dx = quant::fp16_to_fp32(blk.d);
                    sx = quant::fp16_to_fp32(blk.s);
                } else {
                    const auto& blk = reinterpret_cast<const quant::BlockQ8_0*>(xq.data())[b];
                    levels = blk.qs;
                    dx = quant::fp16_to_fp32(blk.d);
                }
                double term = 0, term_magnitude = 0;
                if (with_min) {
                    uint16_t dh;
                    std::memcpy(&dh, row + b * quant::type_info(w.type).block_bytes, 2);
                    double mw = 0;
                    long isum = 0;
                    for (int j = 0; j < quant::kQK; ++j) isum += min_type_level(w.type, row, b, j, &mw) * levels[j];
                    const double scaled = quant::fp16_to_fp32(dh) * dx * static_cast<double>(isum);
                    term = scaled + mw * sx;
                    term_magnitude = std::fabs(scaled) + std::fabs(mw * sx);
                } else {
                    // to_float's values are d_w * level_w exactly, so this is d_w * d_x * isum.
                    for (int j = 0; j < quant::kQK; ++j) {
                        const double p = static_cast<double>(w.values[r * k + b * quant::kQK + j]) * levels[j] * dx;
                        term += p;
                        term_magnitude += std::fabs(p);
                    }
                }
                exact += term;
                magnitude += term_magnitude;
            }
            ref.exact[c * w.n + r] = exact;
            ref.magnitude[c * w.n + r] = magnitude;
        }
    }
    return ref;
}

// The float summation bound of one output (see the top of the file), plus `ref_terms`
// roundings of the reference's own.
double summation_bound(int64_t k, double magnitude, int64_t ref_terms = 0) {
    return static_cast<double>((k + 31) / 32 + 7 + ref_terms) * kUnitRoundoff * magnitude;
}

// The worst ratio |y - exact| / summation_bound over all outputs; infinity when an output is NaN.
double worst_ratio_to_exact(const Weights& w, const std::vector<float>& x, int64_t m, const std::vector<float>& y) {
    const Reference ref = reference(w, x, m);
    double worst = 0;
    for (size_t o = 0; o < ref.exact.size(); ++o) {
        if (std::isnan(y[o])) return INFINITY;
        const double bound = summation_bound(w.k, ref.magnitude[o], ref.ref_terms);
        const double err = std::fabs(y[o] - ref.exact[o]);
        if (err > 0) worst = std::max(worst, bound > 0 ? err / bound : INFINITY);
    }
    return worst;
}

using test::ScopedEnv;

Weights f32_weights(const std::vector<float>& v, int64_t k, int64_t n) {
    Weights w{TypeId::F32, k, n, std::vector<uint8_t>(v.size() * 4), v};
    std::memcpy(w.bytes.data(), v.data(), w.bytes.size());
    return w;
}

// Whether any Vulkan device lists `feature` in `deskside devices`.
bool some_vulkan_device_has(const char* feature) {
    for (const DeviceInfo& d : list_devices())
        if (d.api == "vulkan" && std::count(d.features.begin(), d.features.end(), feature) > 0) return true;
    return false;
}

// y = W x on `device`, the weights at an unaligned offset of their buffer; y read back.
std::vector<float> matmul_on(Backend& device, const Weights& w, int64_t m, const std::vector<float>& xv) {
    const RawTensor wt(device, w, unaligned_offset(w.type));
    DeviceTensor x(device, TypeId::F32, w.k, m, xv);
    DeviceTensor y(device, TypeId::F32, w.n, m);
    device.matmul(wt.t(), x.t(), y.t());
    return y.values();
}

}  // namespace

TEST_CASE("vulkan matmul equals the exact dot of the dequantized weights for every type", "[vulkan]") {
    auto vk = test::vulkan_or_skip();
    if (!vk) return;
    const int64_t n_out = 13;  // not a multiple of any tile height
    for (TypeId type : kTypes) {
        for (int64_t k : row_lengths(type)) {
            const Weights w = make_weights(type, k, n_out, 7);
            const RawTensor wt(*vk, w, unaligned_offset(type));
            for (int64_t m : {1, 7, 64}) {
                INFO(type_name(type) << " k=" << k << " m=" << m);
                const std::vector<float> xv = random_values(k * m, 11 + static_cast<uint32_t>(m));
                // m = 7 uses strided views at odd offsets for x and y.
                const bool strided = m == 7;
                const size_t x_stride = static_cast<size_t>(k + (strided ? 5 : 0)) * 4;
                const size_t y_stride = static_cast<size_t>(n_out + (strided ? 3 : 0)) * 4;
                DeviceTensor x(*vk, TypeId::F32, k, m, xv, strided ? 12 : 0, x_stride);
                DeviceTensor y(*vk, TypeId::F32, n_out, m, strided ? 36 : 0, y_stride);
                vk->matmul(wt.t(), x.t(), y.t());
                CHECK(worst_ratio_to_exact(w, xv, m, y.values()) <= 1.0);
                CHECK(y.guard_intact());
            }
            CHECK(wt.guard_intact());
        }
    }
}

TEST_CASE("vulkan matmul matches the CPU backend within both sides' summation rounding", "[vulkan]") {
    auto vk = test::vulkan_or_skip();
    if (!vk) return;
    cpu::CpuBackend cpu(1);
    const int64_t n_out = 21, m = 5;
    for (TypeId type : kTypes) {
        const int64_t k = row_lengths(type)[1];
        INFO(type_name(type) << " k=" << k);
        const Weights w = make_weights(type, k, n_out, 3);
        const std::vector<float> xv = random_values(k * m, 5);
        std::vector<float> outs[2];
        Backend* backends[2] = {&cpu, vk.get()};
        for (int b = 0; b < 2; ++b) {
            const RawTensor wt(*backends[b], w);
            DeviceTensor x(*backends[b], TypeId::F32, k, m, xv);
            DeviceTensor y(*backends[b], TypeId::F32, n_out, m);
            backends[b]->matmul(wt.t(), x.t(), y.t());
            outs[b] = y.values();
        }
        const std::vector<float> xd = dot_activations(type, xv);
        const Reference ref = reference(w, xv, m);
        double worst = 0;
        for (int64_t c = 0; c < m; ++c) {
            for (int64_t r = 0; r < n_out; ++r) {
                double allowed = 2 * summation_bound(k, ref.magnitude[c * n_out + r], ref.ref_terms);
                if (!quantizes_activations(type)) {
                    double magnitude = 0;
                    for (int64_t i = 0; i < k; ++i) magnitude += std::fabs(static_cast<double>(w.values[r * k + i]) * xd[c * k + i]);
                    allowed = 2 * static_cast<double>(k + 8) * kUnitRoundoff * magnitude;
                }
                const double diff = std::fabs(static_cast<double>(outs[0][c * n_out + r]) - outs[1][c * n_out + r]);
                worst = std::isnan(diff) ? INFINITY : std::max(worst, allowed > 0 ? diff / allowed : diff * INFINITY);
            }
        }
        INFO("worst |vulkan - cpu| / allowed = " << worst);
        CHECK(worst <= 1.0);
    }
}

TEST_CASE("vulkan integer-dot matmul gives the same bits with and without integer dot products", "[vulkan]") {
    // The kernels sum level products with SPV_KHR_integer_dot_product where the device has it
    // (lavapipe does) and with plain multiply-adds under DESKSIDE_VULKAN_DISABLE=int8-dot; both
    // in the exact (shaderFloat64) variants and in the plain ones (fp64 disabled).
    if (!test::vulkan_or_skip()) return;
    if (!some_vulkan_device_has("int8-dot")) WARN("this Vulkan device has no integer dot product: both runs use the fallback");
    const int64_t k = 2304, n_out = 11;
    for (const char* base : {"", "fp64"}) {
        std::unique_ptr<Backend> devices[2];
        {
            const ScopedEnv env("DESKSIDE_VULKAN_DISABLE", base);
            devices[0] = test::vulkan_or_skip();
        }
        {
            const ScopedEnv env("DESKSIDE_VULKAN_DISABLE", std::string(base) + (*base ? "," : "") + "int8-dot");
            devices[1] = test::vulkan_or_skip();
        }
        for (TypeId type : kTypes) {
            if (!quantizes_activations(type)) continue;
            INFO(type_name(type) << ", DESKSIDE_VULKAN_DISABLE=" << base << " vs +int8-dot");
            const Weights w = make_weights(type, k, n_out, 41);
            for (int64_t m : {1, 9}) {
                const std::vector<float> xv = random_values(k * m, 43 + static_cast<uint32_t>(m), -4.0f, 4.0f);
                const std::vector<float> out[2] = {matmul_on(*devices[0], w, m, xv), matmul_on(*devices[1], w, m, xv)};
                CHECK(worst_ratio_to_exact(w, xv, m, out[0]) <= 1.0);
                CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("vulkan matmul and get_rows give the same bits with and without 16-bit storage", "[vulkan]") {
    // With storageBuffer16BitAccess (lavapipe has it) the weight shaders read fp16 scales and
    // F16/BF16 elements with 16-bit loads (the *_s16 variants); DESKSIDE_VULKAN_DISABLE=storage16
    // selects the 32-bit-word path. Both read the same bits, so the outputs must be identical;
    // also with integer dot products off, so every kernel variant is compared.
    // The exact (shaderFloat64) variants and, with fp64 disabled on both sides, the plain ones.
    if (!test::vulkan_or_skip()) return;
    if (!some_vulkan_device_has("storage16")) WARN("this Vulkan device has no 16-bit storage: both runs use the 32-bit-word path");
    struct Pair {
        const char* reference;
        const char* disabled;
    };
    for (const Pair pair : {Pair{"", "storage16"}, Pair{"", "storage16,int8-dot"}, Pair{"fp64", "fp64,storage16,int8-dot"}}) {
        const char* disabled = pair.disabled;
        std::unique_ptr<Backend> reference, fallback;
        {
            const ScopedEnv env("DESKSIDE_VULKAN_DISABLE", pair.reference);
            reference = test::vulkan_or_skip();
        }
        {
            const ScopedEnv env("DESKSIDE_VULKAN_DISABLE", disabled);
            fallback = test::vulkan_or_skip();
        }
        Backend* devices[2] = {reference.get(), fallback.get()};
        for (TypeId type : kTypes) {
            // k with a partial step (and a partial unit for the float types); odd block counts put
            // every other block's fp16 scale at an address that is not a multiple of 4.
            const int64_t k = type == TypeId::F32 || type == TypeId::F16 || type == TypeId::BF16 ? 1100 : row_lengths(type)[1];
            const int64_t n_out = 11;
            INFO(type_name(type) << ", DESKSIDE_VULKAN_DISABLE=" << disabled);
            const Weights w = make_weights(type, k, n_out, 51);
            const std::vector<int32_t> ids{5, 0, 10, 5};
            for (int64_t m : {1, 9}) {
                const std::vector<float> xv = random_values(k * m, 53 + static_cast<uint32_t>(m), -4.0f, 4.0f);
                std::vector<float> out[2], rows[2];
                for (int d = 0; d < 2; ++d) {
                    out[d] = matmul_on(*devices[d], w, m, xv);
                    const RawTensor wt(*devices[d], w, unaligned_offset(type));
                    DeviceTensor dst(*devices[d], TypeId::F32, k, static_cast<int64_t>(ids.size()));
                    devices[d]->get_rows(wt.t(), test::index_tensor(*devices[d], ids), dst.t());
                    rows[d] = dst.values();
                }
                CHECK(worst_ratio_to_exact(w, xv, m, out[0]) <= 1.0);
                CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
                for (size_t i = 0; i < ids.size(); ++i)
                    CHECK(std::memcmp(rows[0].data() + i * k, w.values.data() + ids[i] * k, k * sizeof(float)) == 0);
                CHECK(std::memcmp(rows[0].data(), rows[1].data(), rows[0].size() * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("vulkan matmul columns are bit-identical whatever the number of columns", "[vulkan]") {
    auto vk = test::vulkan_or_skip();
    if (!vk) return;
    const int64_t n_out = 19, m = 33;
    for (TypeId type : kTypes) {
        const int64_t k = row_lengths(type)[1];
        INFO(type_name(type));
        const Weights w = make_weights(type, k, n_out, 9);
        const RawTensor wt(*vk, w);
        DeviceTensor x(*vk, TypeId::F32, k, m, random_values(k * m, 13));
        DeviceTensor all(*vk, TypeId::F32, n_out, m);
        vk->matmul(wt.t(), x.t(), all.t());
        const std::vector<float> full = all.values();
        // One column at a time (the decode shape), and the first 7 columns (a partial tile).
        for (int64_t c : {0, 6, 17, 32}) {
            DeviceTensor one(*vk, TypeId::F32, n_out, 1);
            vk->matmul(wt.t(), x.t().rows(c, 1), one.t());
            const std::vector<float> got = one.values();
            CHECK(std::memcmp(got.data(), full.data() + c * n_out, n_out * sizeof(float)) == 0);
        }
        DeviceTensor seven(*vk, TypeId::F32, n_out, 7);
        vk->matmul(wt.t(), x.t().rows(0, 7), seven.t());
        const std::vector<float> got = seven.values();
        CHECK(std::memcmp(got.data(), full.data(), got.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("vulkan get_rows is bit-identical to quant::to_float for every type", "[vulkan]") {
    auto vk = test::vulkan_or_skip();
    if (!vk) return;
    const std::vector<int32_t> ids{3, 0, 9, 3, 7};
    for (TypeId type : kTypes) {
        const int64_t k = row_lengths(type)[0];
        INFO(type_name(type) << " k=" << k);
        const Weights table = make_weights(type, k, 10, 21);
        const RawTensor tt(*vk, table, unaligned_offset(type));
        DeviceTensor dst(*vk, TypeId::F32, k, static_cast<int64_t>(ids.size()), 8, static_cast<size_t>(k + 1) * 4);
        vk->get_rows(tt.t(), test::index_tensor(*vk, ids), dst.t());
        const std::vector<float> got = dst.values();
        for (size_t i = 0; i < ids.size(); ++i)
            CHECK(std::memcmp(got.data() + i * k, table.values.data() + ids[i] * k, k * sizeof(float)) == 0);
        CHECK(dst.guard_intact());
        // Ids live on the device, so the op cannot check them; a tensor too short for dst is refused.
        CHECK_THROWS_AS(vk->get_rows(tt.t(), test::index_tensor(*vk, {2}), dst.t().rows(0, 2)), std::invalid_argument);
    }
}

TEST_CASE("vulkan matmul and get_rows split tensors larger than one storage-buffer binding", "[vulkan]") {
    // The same ops on a device whose bindings are limited to 4 KiB (vkcore's test hook): W and the
    // table are bound in row ranges (3 rows at a time for F32, 28 for Q4_K), x in ranges of 3
    // columns, and every output must be bit-identical to the unsplit device's.
    auto whole = test::vulkan_or_skip();
    if (!whole) return;
    std::unique_ptr<Backend> split;
    {
        const ScopedEnv limit("DESKSIDE_VULKAN_MAX_BINDING", "4096");
        split = test::vulkan_or_skip();
    }
    const int64_t k = 256, n_out = 40, m = 9;
    const std::vector<float> xv = random_values(k * m, 23);
    const std::vector<int32_t> ids{39, 0, 17, 39, 5};
    for (TypeId type : kTypes) {
        INFO(type_name(type));
        const Weights w = make_weights(type, k, n_out, 29);
        std::vector<float> y_out[2], rows_out[2];
        Backend* devices[2] = {whole.get(), split.get()};
        for (int d = 0; d < 2; ++d) {
            const RawTensor wt(*devices[d], w, unaligned_offset(type));
            DeviceTensor x(*devices[d], TypeId::F32, k, m, xv);
            DeviceTensor y(*devices[d], TypeId::F32, n_out, m);
            devices[d]->matmul(wt.t(), x.t(), y.t());
            DeviceTensor dst(*devices[d], TypeId::F32, k, static_cast<int64_t>(ids.size()));
            devices[d]->get_rows(wt.t(), test::index_tensor(*devices[d], ids), dst.t());
            y_out[d] = y.values();
            rows_out[d] = dst.values();
            CHECK(y.guard_intact());
            CHECK(dst.guard_intact());
        }
        CHECK(worst_ratio_to_exact(w, xv, m, y_out[0]) <= 1.0);
        CHECK(std::memcmp(y_out[0].data(), y_out[1].data(), y_out[0].size() * sizeof(float)) == 0);
        for (size_t i = 0; i < ids.size(); ++i)
            CHECK(std::memcmp(rows_out[1].data() + i * k, w.values.data() + ids[i] * k, k * sizeof(float)) == 0);
    }
}

TEST_CASE("vulkan matmul handles more output rows than one dispatch dimension holds", "[vulkan]") {
    auto vk = test::vulkan_or_skip();
    if (!vk) return;
    // 270000 rows in tiles of 4 = 67500 workgroups, over the 65535 of one dimension.
    const int64_t k = 32, n_out = 270000;
    const Weights w = f32_weights(random_values(k * n_out, 17), k, n_out);
    const RawTensor wt(*vk, w);
    const std::vector<float> xv = random_values(k, 19);
    DeviceTensor x(*vk, TypeId::F32, k, 1, xv);
    DeviceTensor y(*vk, TypeId::F32, n_out, 1);
    vk->matmul(wt.t(), x.t(), y.t());
    const std::vector<float> got = y.values();
    CHECK(std::none_of(got.begin(), got.end(), [](float v) { return std::isnan(v); }));
    for (int64_t r : {int64_t{0}, n_out / 2, n_out - 1}) {
        INFO("row " << r);
        const Weights one = f32_weights(std::vector<float>(w.values.begin() + r * k, w.values.begin() + (r + 1) * k), k, 1);
        CHECK(worst_ratio_to_exact(one, xv, 1, {got[r]}) <= 1.0);
    }
    CHECK(y.guard_intact());
}

TEST_CASE("vulkan matmul and get_rows on tensors quantized by llama.cpp", "[vulkan]") {
    // Real blocks written by llama-quantize (../shared/models): one 2-D tensor of each type in
    // each file, every type of issue #5 among them.
    auto vk = test::vulkan_or_skip();
    if (!vk) return;
    std::set<TypeId> seen;
    for (const char* file : {"stories260K-f16.gguf", "stories260K-bf16.gguf", "stories260K-q8_0.gguf",
                             "stories260K-q4_0.gguf", "stories260K-q4_1.gguf", "stories260K-q5_0.gguf",
                             "stories260K-q5_1.gguf", "synth-k-q2_k.gguf", "synth-k-q3_k_m.gguf", "synth-k-q4_k_m.gguf",
                             "synth-k-q5_k_m.gguf", "synth-k-q6_k.gguf", "synth-k-iq4_nl.gguf", "synth-k-iq4_xs.gguf",
                             "synth-k-iq2_xxs.gguf", "synth-k-iq2_xs.gguf", "synth-k-iq2_s.gguf", "synth-k-iq3_xxs.gguf",
                             "synth-k-iq3_s.gguf", "synth-k-iq1_s.gguf", "synth-k-iq1_m.gguf"}) {
        const models::GgufFile gguf = models::GgufFile::open(test::shared_path(std::string("models/") + file));
        std::set<TypeId> done;
        for (const models::GgufTensorInfo& info : gguf.tensors()) {
            if (info.shape.size() != 2 || !done.insert(info.type).second) continue;
            seen.insert(info.type);
            INFO(file << " " << info.name << " " << type_name(info.type));
            const int64_t k = info.shape[0], n = info.shape[1];
            Weights w{info.type, k, n, std::vector<uint8_t>(info.data, info.data + info.n_bytes), std::vector<float>(k * n)};
            quant::quant_traits(info.type)->to_float(w.bytes.data(), w.values.data(), k * n);
            const RawTensor wt(*vk, w);
            const int64_t m = 3;
            const std::vector<float> xv = random_values(k * m, 31);
            DeviceTensor x(*vk, TypeId::F32, k, m, xv);
            DeviceTensor y(*vk, TypeId::F32, n, m);
            vk->matmul(wt.t(), x.t(), y.t());
            CHECK(worst_ratio_to_exact(w, xv, m, y.values()) <= 1.0);
            const std::vector<int32_t> ids{static_cast<int32_t>(n - 1), 0, static_cast<int32_t>(n / 2)};
            DeviceTensor dst(*vk, TypeId::F32, k, 3);
            vk->get_rows(wt.t(), test::index_tensor(*vk, ids), dst.t());
            const std::vector<float> got = dst.values();
            for (size_t i = 0; i < ids.size(); ++i)
                CHECK(std::memcmp(got.data() + i * k, w.values.data() + ids[i] * k, k * sizeof(float)) == 0);
        }
    }
    CHECK(seen.size() == std::size(kTypes) - 1);  // all but F32, which the random tests cover
}

TEST_CASE("vulkan matmul rejects unsupported types and mismatched shapes", "[vulkan]") {
    auto vk = test::vulkan_or_skip();
    if (!vk) return;
    const Weights w = make_weights(TypeId::Q8_0, 64, 4, 1);
    const RawTensor wt(*vk, w);
    DeviceTensor x(*vk, TypeId::F32, 64, 2, random_values(128, 2));
    DeviceTensor y(*vk, TypeId::F32, 4, 2);
    DeviceTensor wrong(*vk, TypeId::F32, 5, 2);
    CHECK_THROWS_WITH(vk->matmul(wt.t(), x.t(), wrong.t()), Catch::Contains("expected W [k, n]"));
    Tensor q8_1 = wt.t();  // Q8_1 is an activation format: no weight kernel
    q8_1.type = TypeId::Q8_1;
    CHECK_THROWS_WITH(vk->matmul(q8_1, x.t(), y.t()), Catch::Contains("unsupported weight type"));
}

}  // namespace deskside::backends
