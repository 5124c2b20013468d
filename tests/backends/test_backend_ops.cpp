// The op conformance suite of backends/backend.h: every op, every weight type and every KV cache
// type on every usable non-CPU device (vulkan0 on lavapipe; cuda0 on a GPU machine), against the
// CPU backend on the same inputs. A new backend passes this suite (backend.h).
//
// Outputs start as NaN (an element an op skips fails) and are followed by guard bytes (a write
// past the end fails). Weights go through map_weight_matrix on both sides, so the CPU side is the
// one the engine runs (its repacked layouts included). Where supports() says no for an (op, type)
// the combination is skipped with a WARN naming it; every combination it says yes to is run.
// Without a non-CPU device the suite WARNs why and runs nothing, unless DESKSIDE_REQUIRE_DEVICES
// names a device that is absent: then it fails (op_harness.h).
//
// Tolerances, device vs CPU ("scaled" = |dev - cpu| / max(1, |cpu|): absolute below 1, relative
// above; u = 2^-24, float's unit roundoff):
//
//   op             bound                                   why
//   get_rows       bit-exact; scaled 2^-22 for the types   dequantization is d*q in float on both sides;
//                  with a min (q4_1 q5_1 q2_K q4_K q5_K)   d*q - m may be one fused multiply-add
//   matmul         |dev - cpu| <= 8 sqrt(n + 8) u S,       the float roundings of one output: k products
//                  S = sum |w_i x_i|; n = k for F32, F16,  (x rounded to F16/BF16 as the CPU does), or per
//                  BF16, n = 3k/32 for quantized types     32-block a scale, a min and a sum of exact integer
//                                                          dots (x quantized with the CPU's bytes); each side
//                                                          sums in its order: a random walk, 8 sigma
//                  bit-exact: a column of m=17 and the     batch invariance (DESIGN.md decision 5)
//                  same column alone (m=1), on the device
//   rms_norm       scaled 1e-5                             the sum of squares in another order
//   rope           absolute 2e-5 (inputs in [-1, 1])       device sin/cos of angles up to 1.3e5 rad
//                                                          reduced by 2 pi: a few 1e-6 rad
//   attention      absolute 1e-3 (values in [-1, 1])       exp() ulps and the q.k order can flip an F16
//                                                          rounding of the running sum: one F16 step
//   silu           scaled 1e-5                             the device's exp() (Vulkan: 3 + 2|x| ulp)
//   gelu           scaled 2^-10                            both round through F16 (llama.cpp's table): one
//                                                          F16 step where tanh's ulps cross a tie
//   add mul scale  bit-exact                               one IEEE operation per element
//   copy set_rows  F32 -> F32/F16/BF16: bit-exact          round to nearest even
//                  F32 -> Q8_0: one step (amax/127) and    1/d is a division (Vulkan: 2.5 ulp): a quant on
//                  99% of the bytes identical              a tie may move one step
//                  F32 -> other quantized: the device's    their quantizers search scales: a tie moves the
//                  error at most 1.25x the reference's     search, not the error
//                  T -> F32: as get_rows; T -> T: exact    dequantization; a byte copy (the KV block copy)
//                  rows set_rows does not list: exact
//   copy_to        bit-exact: device <-> CPU, on the       a byte copy
//                  device, between devices
//   attention      as attention                            the sink is one more exp() and rescale
//     with sinks
//   moe_route      ids exact; weights scaled 1e-5          exp() ulps (logits far from ties: the ranking
//                                                          cannot move)
//   matmul_id      as matmul (its bound, per output), and  each row is matmul's computation with its
//                  bit-exact: a token alone vs in a batch  expert's matrix
//   add_id         bit-exact                               one IEEE addition per element
//   moe_combine    bit-exact                               products rounded, then added in slot order
//   swiglu_oai     scaled 1e-5                             as silu
//
// Measured on lavapipe (llvmpipe, LLVM 15), with its exact variants and with the plain ones a GPU
// runs (DESKSIDE_VULKAN_EXACT=0): matmul at most 0.025 of its bound (q4_1), attention 1.4e-4, rope
// 1.2e-7, rms_norm and silu 2.6e-7; every other op bit-exact.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "kernel_test_data.h"
#include "op_harness.h"
#include "quant/blocks.h"
#include "quant/float16.h"
#include "support/index_args.h"
#include "support/scoped_env.h"

namespace deskside::backends {
namespace {

using quant::TypeId;
using test::DeviceTensor;
using test::random_values;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);
constexpr double kMatmulSigmas = 8.0;
constexpr double kGetRowsWithMin = 1.0 / (1 << 22);
constexpr double kRmsNorm = 1e-5, kRope = 2e-5, kAttention = 1e-3, kSilu = 1e-5, kGelu = 1.0 / 1024;
constexpr double kRouterWeights = 1e-5, kSwigluOai = 1e-5;

// The weight types of the CPU backend (quant/quant.h's traits less the activation formats).
constexpr TypeId kWeightTypes[] = {TypeId::F32,  TypeId::F16,  TypeId::BF16, TypeId::Q4_0,   TypeId::Q4_1,
                                   TypeId::Q5_0, TypeId::Q5_1, TypeId::Q8_0, TypeId::Q2_K,   TypeId::Q3_K,
                                   TypeId::Q4_K, TypeId::Q5_K, TypeId::Q6_K, TypeId::IQ4_NL, TypeId::IQ4_XS,
                                   TypeId::IQ2_XXS, TypeId::IQ2_XS, TypeId::IQ2_S, TypeId::IQ3_XXS, TypeId::IQ3_S,
                                   TypeId::IQ1_S, TypeId::IQ1_M};
// The KV cache types the engine offers (engine/kv_cache.h).
constexpr TypeId kCacheTypes[] = {TypeId::F16, TypeId::Q8_0, TypeId::F32};

std::string type_name(TypeId t) { return std::string(quant::type_info(t).name); }
bool listed(std::span<const TypeId> list, TypeId t) { return std::find(list.begin(), list.end(), t) != list.end(); }

// Runs `fn` on every device under test with a fresh single-thread CPU backend as the reference.
void for_each_device(const std::function<void(Backend& dev, cpu::CpuBackend& cpu)>& fn) {
    for (const DeviceInfo& d : test::devices_under_test()) {
        INFO("device " << d.name << " (" << d.description << ")");
        cpu::CpuBackend cpu(1);
        fn(test::shared_test_device(d), cpu);
    }
}

// The types to run `op` with on `dev`: those of `wanted` that supports() says yes to (one WARN
// names the others: a skip, not a failure) and any other it says yes to, where the CPU has the op.
std::vector<TypeId> claimed_types(Backend& dev, Backend& cpu, Op op, std::span<const TypeId> wanted) {
    std::vector<TypeId> out;
    std::string skipped;
    for (const quant::TypeInfo& info : quant::all_types()) {
        const TypeId t = info.id;
        if (!cpu.supports(op, t) || (!listed(wanted, t) && !dev.supports(op, t))) continue;
        // The ops that write or read a cache of `t` get their data from t's quantizer.
        const bool makeable =
            op == Op::GetRows || op == Op::Matmul || op == Op::MatmulId || quant::quant_traits(t)->from_float;
        if (!makeable) {
            WARN("NOT RUN " << dev.name() << " " << op_name(op) << " " << type_name(t) << ": no quantizer for data");
            continue;
        }
        if (dev.supports(op, t)) out.push_back(t);
        else skipped += " " + type_name(t);
    }
    if (!skipped.empty()) WARN("SKIPPED " << dev.name() << " " << op_name(op) << ": supports() says no for" << skipped);
    return out;
}

// Runs `op` and FAILs the check (not the test) with the exception's message when it throws:
// supports() said yes, so the combination must run.
bool runs(const std::string& what, const std::function<void()>& op) {
    try {
        op();
        return true;
    } catch (const std::exception& e) {
        FAIL_CHECK(what << " threw although supports() says yes: " << e.what());
        return false;
    }
}

// ---- weights ------------------------------------------------------------------------------------

// Row length per type: a tail that is not a multiple of 32 (float types, 172 as stories260K's
// ffn_down), an odd number of blocks otherwise.
int64_t row_length(TypeId t) {
    switch (quant::type_info(t).block_size) {
        case 1: return 172;
        case 32: return 288;
        default: return 768;
    }
}

// n rows of k elements: quantized Gaussians where the type has a quantizer, else (the i-quants)
// random levels and group scales under a small fp16 super-block scale (test::set_block_scale).
std::vector<uint8_t> weight_bytes(TypeId type, int64_t k, int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    if (quant::quant_traits(type)->from_float) return test::weight_rows(type, k, n, false, rng);
    static_assert(offsetof(quant::BlockIq4Nl, d) == 0 && offsetof(quant::BlockIq4Xs, d) == 0);
    std::vector<uint8_t> bytes(quant::row_bytes(type, k) * n);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> scale(-0.004f, 0.004f);
    for (size_t at = 0; at < bytes.size(); at += quant::type_info(type).block_bytes) {
        test::set_block_scale(type, bytes.data() + at, quant::fp32_to_fp16(scale(rng)));
    }
    return bytes;
}

// A weight matrix placed as the engine places one (map_weight_matrix); `bytes` must outlive it.
struct Matrix {
    std::unique_ptr<Buffer> buffer;
    Tensor t;
    Matrix(Backend& be, const std::vector<uint8_t>& bytes, TypeId type, int64_t k, int64_t n)
        : buffer(be.map_weight_matrix(bytes.data(), type, k, n)), t(make_tensor(buffer.get(), 0, type, k, n)) {}
};

bool has_min(TypeId t) {
    return t == TypeId::Q4_1 || t == TypeId::Q5_1 || t == TypeId::Q2_K || t == TypeId::Q4_K || t == TypeId::Q5_K;
}

}  // namespace

TEST_CASE("backend ops: get_rows of every weight type equals the CPU's", "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        const std::vector<int32_t> ids{3, 0, 9, 3, 7};
        const int64_t n = static_cast<int64_t>(ids.size());
        for (const TypeId type : claimed_types(dev, cpu, Op::GetRows, kWeightTypes)) {
            const int64_t k = row_length(type);
            INFO(type_name(type) << " k=" << k);
            const std::vector<uint8_t> bytes = weight_bytes(type, k, 10, 21);
            std::vector<float> out[2];
            for (int s = 0; s < 2; ++s) {
                Backend& be = s == 0 ? dev : static_cast<Backend&>(cpu);
                const Matrix table(be, bytes, type, k, 10);
                DeviceTensor dst(be, TypeId::F32, k, n, 8, static_cast<size_t>(k + 1) * 4);  // strided
                const auto op = [&] { be.get_rows(table.t, test::index_tensor(be, ids), dst.t()); };
                if (!runs("get_rows " + type_name(type), op)) break;
                CHECK(dst.guard_intact());
                out[s] = dst.values();
            }
            if (out[0].empty()) continue;
            if (has_min(type)) CHECK(test::max_scaled_diff(out[0], out[1]) <= kGetRowsWithMin);
            else CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
        }
    });
}

TEST_CASE("backend ops: matmul of every weight type at m = 1, 3, 17 matches the CPU and is batch invariant",
          "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        const int64_t n_out = 37, m_max = 17;  // n_out: not a multiple of any tile height
        for (const TypeId type : claimed_types(dev, cpu, Op::Matmul, kWeightTypes)) {
            const int64_t k = row_length(type);
            INFO(type_name(type) << " k=" << k);
            const std::vector<uint8_t> bytes = weight_bytes(type, k, n_out, 7);
            std::vector<float> w(k * n_out);
            quant::quant_traits(type)->to_float(bytes.data(), w.data(), k * n_out);
            const std::vector<float> xv = random_values(k * m_max, 11);
            const double terms = quant::type_info(type).block_size == 1 ? k : 3.0 * k / 32;
            const double per_magnitude = kMatmulSigmas * std::sqrt(terms + 8) * kUnitRoundoff;

            const Matrix wd(dev, bytes, type, k, n_out), wc(cpu, bytes, type, k, n_out);
            std::vector<float> dev_full;
            for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{17}}) {
                INFO("m=" << m);
                // m = 3: x and y are strided views at offsets that are not multiples of 16.
                const bool strided = m == 3;
                const std::vector<float> xm(xv.begin(), xv.begin() + k * m);
                std::vector<float> out[2];
                for (int s = 0; s < 2; ++s) {
                    Backend& be = s == 0 ? dev : static_cast<Backend&>(cpu);
                    const size_t x_stride = static_cast<size_t>(k + (strided ? 5 : 0)) * 4;
                    const size_t y_stride = static_cast<size_t>(n_out + (strided ? 3 : 0)) * 4;
                    DeviceTensor x(be, TypeId::F32, k, m, xm, strided ? 12 : 0, x_stride);
                    DeviceTensor y(be, TypeId::F32, n_out, m, strided ? 36 : 0, y_stride);
                    const Tensor& w_t = (s == 0 ? wd : wc).t;
                    if (!runs("matmul " + type_name(type), [&] { be.matmul(w_t, x.t(), y.t()); })) break;
                    CHECK(y.guard_intact());
                    out[s] = y.values();
                }
                if (out[0].empty()) break;
                double worst = 0;
                for (int64_t c = 0; c < m; ++c)
                    for (int64_t r = 0; r < n_out; ++r) {
                        double magnitude = 0;
                        for (int64_t i = 0; i < k; ++i) magnitude += std::fabs(double{w[r * k + i]} * xv[c * k + i]);
                        const double diff = std::fabs(double{out[0][c * n_out + r]} - out[1][c * n_out + r]);
                        worst = std::max(worst, std::isnan(diff) ? INFINITY : diff / (per_magnitude * magnitude));
                    }
                INFO("worst |dev - cpu| / bound = " << worst);
                CHECK(worst <= 1.0);
                if (m == m_max) dev_full = out[0];
            }
            if (dev_full.empty()) continue;
            // Batch invariance: columns of the m = 17 product alone give the same bits.
            DeviceTensor x(dev, TypeId::F32, k, m_max, xv);
            for (const int64_t c : {0, 8, 16}) {
                DeviceTensor one(dev, TypeId::F32, n_out, 1);
                dev.matmul(wd.t, x.t().rows(c, 1), one.t());
                const std::vector<float> got = one.values();
                INFO("column " << c << " alone vs in m=17");
                CHECK(std::memcmp(got.data(), dev_full.data() + c * n_out, n_out * sizeof(float)) == 0);
            }
        }
    });
}

namespace {

// `op` on both sides on tensors built by the same code: {device's output, CPU's output}.
struct Outputs {
    std::vector<float> dev, cpu;
};
Outputs run_both(Backend& dev, Backend& cpu, const std::function<std::vector<float>(Backend&)>& op) {
    return {op(dev), op(cpu)};
}

// Strided views: rows at an offset that is not a multiple of 16 bytes, padded between rows.
constexpr size_t kOddOffset = 4 * 3;
size_t padded_stride(int64_t ne0) { return static_cast<size_t>(ne0 + 5) * 4; }

}  // namespace

TEST_CASE("backend ops: add, mul, scale, silu and gelu match the CPU", "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        struct Shape {
            int64_t ne0, ne1;
            bool broadcast, strided;
        };
        for (const Shape s : {Shape{37, 5, false, false}, Shape{1024, 3, true, true}, Shape{3000, 2, false, true}}) {
            INFO(s.ne0 << " x " << s.ne1 << (s.broadcast ? " broadcast" : "") << (s.strided ? " strided" : ""));
            const int64_t b_rows = s.broadcast ? 1 : s.ne1;
            // a in [-12, 12]: GELU's saturation at |x| >= 10 and SiLU's tails are exercised.
            const std::vector<float> av = random_values(s.ne0 * s.ne1, 1, -12.0f, 12.0f);
            const std::vector<float> bv = random_values(s.ne0 * b_rows, 2);
            for (const char* op : {"add", "mul", "scale", "silu", "gelu"}) {
                const std::string name = op;
                INFO(name);
                const Outputs out = run_both(dev, cpu, [&](Backend& be) {
                    const size_t off = s.strided ? kOddOffset : 0;
                    const size_t stride = s.strided ? padded_stride(s.ne0) : s.ne0 * 4;
                    DeviceTensor a(be, TypeId::F32, s.ne0, s.ne1, av, off, stride);
                    DeviceTensor b(be, TypeId::F32, s.ne0, b_rows, bv);
                    DeviceTensor y(be, TypeId::F32, s.ne0, s.ne1, off, stride);
                    if (name == "add") be.add(a.t(), b.t(), y.t());
                    if (name == "mul") be.mul(a.t(), b.t(), y.t());
                    if (name == "scale") be.scale(a.t(), 0.37f, y.t());
                    if (name == "silu") be.silu(a.t(), y.t());
                    if (name == "gelu") be.gelu(a.t(), y.t());
                    CHECK(y.guard_intact());
                    return y.values();
                });
                const double bound = name == "silu" ? kSilu : name == "gelu" ? kGelu : 0.0;
                CHECK(test::max_scaled_diff(out.dev, out.cpu) <= bound);
            }
        }
    });
}

TEST_CASE("backend ops: rms_norm matches the CPU and is batch invariant", "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        for (const int64_t ne0 : {64, 1000, 4096}) {
            const int64_t ne1 = 5;
            const std::vector<float> xv = random_values(ne0 * ne1, 10, -3.0f, 3.0f);
            const std::vector<float> wv = random_values(ne0, 11, 0.5f, 1.5f);
            for (const bool weighted : {true, false}) {
                INFO("ne0 " << ne0 << (weighted ? " weighted" : ""));
                const auto norm = [&](Backend& be, const std::vector<float>& x, int64_t rows) {
                    DeviceTensor xt(be, TypeId::F32, ne0, rows, x, kOddOffset, padded_stride(ne0));
                    DeviceTensor w(be, TypeId::F32, ne0, 1, wv);
                    DeviceTensor y(be, TypeId::F32, ne0, rows);
                    be.rms_norm(xt.t(), weighted ? w.t() : Tensor{}, 1e-6f, y.t());
                    CHECK(y.guard_intact());
                    return y.values();
                };
                const Outputs out = run_both(dev, cpu, [&](Backend& be) { return norm(be, xv, ne1); });
                CHECK(test::max_scaled_diff(out.dev, out.cpu) <= kRmsNorm);
                const std::vector<float> one = norm(dev, std::vector<float>(xv.end() - ne0, xv.end()), 1);
                CHECK(std::memcmp(one.data(), out.dev.data() + (ne1 - 1) * ne0, ne0 * sizeof(float)) == 0);
            }
        }
    });
}

TEST_CASE("backend ops: rope matches the CPU, neox and not, for every scaling", "[backend-ops]") {
    const std::vector<float> factors = random_values(32, 12, 1.0f, 8.0f);
    // 4 heads of 64; n_rot 32 rotates part of each head (the rest stays as it is).
    const auto params = [](bool neox, int64_t n_rot, RopeScalingType scaling, float factor, int64_t orig_ctx,
                           float base) {
        RopeParams p;
        p.n_head = 4;
        p.head_dim = 64;
        p.n_rot = n_rot;
        p.neox = neox;
        p.scaling = scaling;
        p.scaling_factor = factor;
        p.orig_ctx = orig_ctx;
        p.freq_base = base;
        return p;
    };
    using S = RopeScalingType;
    std::vector<std::pair<std::string, RopeParams>> cases{
        {"normal", params(false, 64, S::None, 1, 0, 1e4f)},
        {"neox", params(true, 64, S::None, 1, 0, 1e4f)},
        {"neox partial", params(true, 32, S::None, 1, 0, 1e4f)},
        {"linear", params(false, 64, S::Linear, 4, 0, 1e4f)},
        {"yarn", params(false, 64, S::Yarn, 4, 4096, 1e6f)},
        {"yarn neox", params(true, 64, S::Yarn, 4, 4096, 1e6f)},
        {"llama3", params(false, 64, S::Llama3, 8, 8192, 5e5f)},
        {"llama3 neox", params(true, 64, S::Llama3, 8, 8192, 5e5f)},
    };
    for (const bool neox : {false, true}) {
        RopeParams p = params(neox, 64, S::Llama3, 8, 8192, 5e5f);
        p.freq_factors = factors;  // rope_freqs.weight of a Llama 3.1 file
        cases.push_back({neox ? "freq_factors neox" : "freq_factors", p});
    }

    const std::vector<int32_t> positions{0, 1, 7, 100, 4095, 33000, 131000};
    const int64_t n = static_cast<int64_t>(positions.size());
    for_each_device([&](Backend& dev, cpu::CpuBackend& cpu) {
        for (const auto& [name, rope] : cases) {
            INFO(name);
            const int64_t ne0 = rope.n_head * rope.head_dim;
            const std::vector<float> xv = random_values(ne0 * n, 13);
            const Outputs out = run_both(dev, cpu, [&](Backend& be) {
                DeviceTensor x(be, TypeId::F32, ne0, n, xv, kOddOffset, padded_stride(ne0));
                RopeParams rp = rope;
                rp.n_ctx = 131001;  // above every position
                be.rope(x.t(), test::index_tensor(be, positions), rp);
                CHECK(x.guard_intact());
                return x.values();
            });
            CHECK(test::max_abs_diff(out.dev, out.cpu) <= kRope);
        }
    });
}

namespace {

// A destination of `type` written by the device and by the CPU from the same F32 values `x`:
// CHECKs the stated bound for that destination type (see the top of the file).
void check_converted(TypeId type, const std::vector<float>& x, const DeviceTensor& dev, const DeviceTensor& cpu) {
    const std::vector<uint8_t> dev_bytes = dev.row_bytes(), cpu_bytes = cpu.row_bytes();
    if (quant::type_info(type).block_size == 1) {
        CHECK(dev_bytes == cpu_bytes);
        return;
    }
    const std::vector<float> dv = dev.values(), cv = cpu.values();
    if (type == TypeId::Q8_0) {
        float amax = 0;
        for (float v : x) amax = std::max(amax, std::fabs(v));
        CHECK(test::max_abs_diff(dv, cv) <= amax / 127 * (1 + 1e-6));
        size_t same = 0;
        for (size_t i = 0; i < dev_bytes.size(); ++i) same += dev_bytes[i] == cpu_bytes[i];
        CHECK(same >= dev_bytes.size() * 99 / 100);
        return;
    }
    double dev_err = 0, cpu_err = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        dev_err = std::max(dev_err, std::isnan(dv[i]) ? INFINITY : std::fabs(double{dv[i]} - x[i]));
        cpu_err = std::max(cpu_err, std::fabs(double{cv[i]} - x[i]));
    }
    CHECK(dev_err <= 1.25 * cpu_err + 1e-7);
}

}  // namespace

TEST_CASE("backend ops: copy converts F32 to and from each destination type as the CPU does", "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        // 320 = 10 blocks of 32 (Q8_0 rows of 340 bytes, not 4-byte aligned); K-quants need 256s.
        for (const TypeId type : claimed_types(dev, cpu, Op::Copy, kCacheTypes)) {
            const int64_t ne0 = quant::type_info(type).block_size > 32 ? 512 : 320, ne1 = 7;
            INFO(type_name(type));
            const std::vector<float> xv = random_values(ne0 * ne1, 14, -4.0f, 4.0f);
            // F32 -> type.
            DeviceTensor src_d(dev, TypeId::F32, ne0, ne1, xv), src_c(cpu, TypeId::F32, ne0, ne1, xv);
            DeviceTensor dst_d(dev, type, ne0, ne1), dst_c(cpu, type, ne0, ne1);
            cpu.copy(src_c.t(), dst_c.t());
            if (!runs("copy f32 -> " + type_name(type), [&] { dev.copy(src_d.t(), dst_d.t()); })) continue;
            CHECK(dst_d.guard_intact());
            check_converted(type, xv, dst_d, dst_c);
            // type -> F32 and type -> type (the KV cache's block copy, engine/kv_cache.cpp), both from
            // the reference's bytes.
            DeviceTensor typed_d(dev, type, ne0, ne1, xv), typed_c(cpu, type, ne0, ne1, xv);
            DeviceTensor back_d(dev, TypeId::F32, ne0, ne1, kOddOffset, padded_stride(ne0));
            DeviceTensor back_c(cpu, TypeId::F32, ne0, ne1);
            cpu.copy(typed_c.t(), back_c.t());
            if (runs("copy " + type_name(type) + " -> f32", [&] { dev.copy(typed_d.t(), back_d.t()); })) {
                CHECK(back_d.guard_intact());
                if (has_min(type)) CHECK(test::max_scaled_diff(back_d.values(), back_c.values()) <= kGetRowsWithMin);
                else CHECK(back_d.values() == back_c.values());
            }
            DeviceTensor same_d(dev, type, ne0, ne1);
            const std::string same = "copy " + type_name(type) + " -> " + type_name(type);
            if (runs(same, [&] { dev.copy(typed_d.t(), same_d.t()); })) {
                CHECK(same_d.guard_intact());
                CHECK(same_d.row_bytes() == typed_c.row_bytes());
            }
        }
    });
}

TEST_CASE("backend ops: set_rows writes the listed KV cache rows as the CPU does and no others", "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        for (const TypeId type : claimed_types(dev, cpu, Op::SetRows, kCacheTypes)) {
            const int64_t ne0 = quant::type_info(type).block_size > 32 ? 256 : 96, n_cache = 20;
            INFO(type_name(type));
            const std::vector<float> before = random_values(ne0 * n_cache, 15);
            const std::vector<float> src_v = random_values(ne0 * 4, 16, -2.0f, 2.0f);
            const std::vector<int32_t> rows{17, 3, 4, 0};
            DeviceTensor cache_d(dev, type, ne0, n_cache, before), cache_c(cpu, type, ne0, n_cache, before);
            DeviceTensor src_d(dev, TypeId::F32, ne0, 4, src_v, kOddOffset, padded_stride(ne0));
            DeviceTensor src_c(cpu, TypeId::F32, ne0, 4, src_v);
            cpu.set_rows(src_c.t(), cache_c.t(), test::index_tensor(cpu, rows));
            const auto write = [&] { dev.set_rows(src_d.t(), cache_d.t(), test::index_tensor(dev, rows)); };
            if (!runs("set_rows -> " + type_name(type), write)) continue;
            CHECK(cache_d.guard_intact());
            const std::vector<uint8_t> all_d = cache_d.row_bytes(), all_c = cache_c.row_bytes();
            const size_t row = quant::row_bytes(type, ne0);
            for (int64_t r = 0; r < n_cache; ++r) {
                if (std::find(rows.begin(), rows.end(), r) != rows.end()) continue;
                INFO("row " << r << " is not listed");
                CHECK(std::memcmp(all_d.data() + r * row, all_c.data() + r * row, row) == 0);
            }
            // The written rows, as written by the same conversion as copy's.
            for (size_t i = 0; i < rows.size(); ++i) {
                const std::vector<float> x(src_v.begin() + i * ne0, src_v.begin() + (i + 1) * ne0);
                const DeviceTensor one_d(dev, type, ne0, 1), one_c(cpu, type, ne0, 1);
                dev.upload(*one_d.t().buffer, 0, all_d.data() + rows[i] * row, row);
                cpu.upload(*one_c.t().buffer, 0, all_c.data() + rows[i] * row, row);
                INFO("row " << rows[i]);
                check_converted(type, x, one_d, one_c);
            }
        }
    });
}

namespace {

struct AttentionShape {
    int64_t n_head, n_head_kv, head_dim, window;
    bool sinks = false;  // AttentionParams::sinks: one logit per head in [-4, 4]
};

// Attention of five queries of two sequences over a paged cache of `k_type` / `v_type`; CHECKs
// the device against the CPU.
void check_attention(Backend& dev, Backend& cpu, TypeId k_type, TypeId v_type, const AttentionShape& c) {
    INFO("k " << type_name(k_type) << " v " << type_name(v_type) << ", heads " << c.n_head << "/" << c.n_head_kv
              << ", dim " << c.head_dim << ", window " << c.window << (c.sinks ? ", sinks" : ""));
    const int64_t block_size = 16, n_cache = 12 * block_size, kv_width = c.n_head_kv * c.head_dim;
    if (kv_width % quant::type_info(k_type).block_size || kv_width % quant::type_info(v_type).block_size) {
        WARN("NOT RUN: a cache row of " << kv_width << " elements is not whole blocks of these types");
        return;
    }
    const std::vector<float> kv_k = random_values(kv_width * n_cache, 18), kv_v = random_values(kv_width * n_cache, 19);
    // Two sequences with interleaved, unordered blocks: a prompt chunk of A, a decode token of B,
    // A's first token and a position in A's last, partly filled block.
    const std::vector<int32_t> blocks_a{3, 0, 7, 5, 9, 11, 1}, blocks_b{2, 10, 4};
    const std::vector<test::TestQuery> queries{
        {100, blocks_a}, {101, blocks_a}, {47, blocks_b}, {0, blocks_a}, {111, blocks_a}};
    const int64_t n = static_cast<int64_t>(queries.size());
    const std::vector<float> qv = random_values(c.n_head * c.head_dim * n, 20, -2.0f, 2.0f);
    AttentionParams p;
    p.n_head = c.n_head;
    p.n_head_kv = c.n_head_kv;
    p.head_dim = p.head_dim_v = c.head_dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    p.window = c.window;
    std::vector<float> out[2];
    Backend* sides[2] = {&dev, &cpu};
    for (int s = 0; s < 2; ++s) {
        Backend& be = *sides[s];
        DeviceTensor k(be, k_type, kv_width, n_cache, kv_k), v(be, v_type, kv_width, n_cache, kv_v);
        DeviceTensor q(be, TypeId::F32, c.n_head * c.head_dim, n, qv, kOddOffset, padded_stride(c.n_head * c.head_dim));
        DeviceTensor o(be, TypeId::F32, c.n_head * c.head_dim, n);
        const KvCacheView kv{k.t(), v.t(), block_size};
        DeviceTensor sinks(be, TypeId::F32, c.n_head, 1, random_values(c.n_head, 22, -4.0f, 4.0f));
        p.sinks = c.sinks ? sinks.t() : Tensor{};
        if (!runs("attention", [&] { be.attention(q.t(), kv, test::attention_args(be, queries), p, o.t()); })) return;
        CHECK(o.guard_intact());
        out[s] = o.values();
    }
    CHECK(test::max_abs_diff(out[0], out[1]) <= kAttention);
}

}  // namespace

TEST_CASE("backend ops: attention over a paged cache matches the CPU (cache types, GQA, window, block tables)",
          "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        const std::vector<TypeId> types = claimed_types(dev, cpu, Op::Attention, kCacheTypes);
        for (const TypeId type : types)
            for (const AttentionShape c : {AttentionShape{8, 2, 64, 0}, AttentionShape{4, 4, 128, 0},
                                           AttentionShape{8, 2, 64, 37}, AttentionShape{4, 1, 96, 20}})
                check_attention(dev, cpu, type, type, c);
        // K and V types are chosen separately (--cache-type-k, --cache-type-v) and supports() is
        // asked for each: every pair of claimed types must run.
        for (const TypeId k_type : types)
            for (const TypeId v_type : types)
                if (k_type != v_type) check_attention(dev, cpu, k_type, v_type, AttentionShape{8, 2, 64, 0});
        // Attention sinks (gpt-oss): every claimed cache type, with and without a window.
        for (const TypeId type : types)
            for (const int64_t window : {int64_t{0}, int64_t{37}})
                check_attention(dev, cpu, type, type, AttentionShape{8, 2, 64, window, true});
    });
}

TEST_CASE("backend ops: moe_route chooses the CPU's experts with its weights", "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        if (!dev.supports(Op::MoeRoute, TypeId::F32)) {
            WARN("SKIPPED " << dev.name() << " moe_route: supports() says no");
            return;
        }
        for (const int64_t n_expert : {int64_t{32}, int64_t{128}}) {
            const int64_t n = 7;
            const std::vector<float> logits = random_values(n_expert * n, 23, -4.0f, 4.0f);
            for (const int64_t n_used : {int64_t{1}, int64_t{4}, int64_t{8}}) {
                for (const MoeGating gating : {MoeGating::SoftmaxThenTopK, MoeGating::TopKThenSoftmax}) {
                    for (const bool normalize : {false, true}) {
                        INFO("n_expert " << n_expert << " n_used " << n_used << " gating " << static_cast<int>(gating)
                                         << (normalize ? " normalised" : ""));
                        std::vector<int32_t> ids[2];
                        std::vector<float> weights[2];
                        Backend* sides[2] = {&dev, &cpu};
                        for (int s = 0; s < 2; ++s) {
                            Backend& be = *sides[s];
                            DeviceTensor l(be, TypeId::F32, n_expert, n, logits, kOddOffset, padded_stride(n_expert));
                            test::IndexTensor id = test::index_tensor(be, std::vector<int32_t>(n_used * n, -1));
                            id.tensor.ne0 = n_used;
                            id.tensor.ne1 = n;
                            id.tensor.row_stride = static_cast<size_t>(n_used) * 4;
                            DeviceTensor w(be, TypeId::F32, n_used, n);
                            const MoeRouteParams p{n_expert, n_used, gating, normalize};
                            if (!runs("moe_route", [&] { be.moe_route(l.t(), p, id.tensor, w.t()); })) return;
                            CHECK(w.guard_intact());
                            ids[s].resize(n_used * n);
                            be.download(*id.buffer, 0, ids[s].data(), ids[s].size() * 4);
                            weights[s] = w.values();
                        }
                        CHECK(ids[0] == ids[1]);
                        CHECK(test::max_scaled_diff(weights[0], weights[1]) <= kRouterWeights);
                    }
                }
            }
        }
    });
}

TEST_CASE("backend ops: matmul_id of every weight type matches the CPU and is batch invariant", "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        // n_out 16: whole x8 groups per expert on the CPU (every real MoE model's n_out is a
        // multiple of 8); ids with repeats across tokens, 11 tokens.
        const int64_t n_expert = 5, n_out = 16, n_used = 3, n = 11;
        std::vector<int32_t> idv;
        for (int64_t t = 0; t < n; ++t)
            for (int64_t s = 0; s < n_used; ++s)
                idv.push_back(static_cast<int32_t>((t * 2 + s * 3 + t % 3) % n_expert));
        for (const TypeId type : claimed_types(dev, cpu, Op::MatmulId, kWeightTypes)) {
            const int64_t k = row_length(type);
            INFO(type_name(type) << " k=" << k);
            const std::vector<uint8_t> bytes = weight_bytes(type, k, n_expert * n_out, 24);
            std::vector<float> w(k * n_expert * n_out);
            quant::quant_traits(type)->to_float(bytes.data(), w.data(), k * n_expert * n_out);
            const double terms = quant::type_info(type).block_size == 1 ? k : 3.0 * k / 32;
            const double per_magnitude = kMatmulSigmas * std::sqrt(terms + 8) * kUnitRoundoff;
            const Matrix wd(dev, bytes, type, k, n_expert * n_out), wc(cpu, bytes, type, k, n_expert * n_out);
            for (const bool per_slot : {false, true}) {
                INFO((per_slot ? "x per slot" : "x per token"));
                const int64_t x_rows = per_slot ? n_used * n : n;
                const std::vector<float> xv = random_values(k * x_rows, 25);
                std::vector<float> out[2];
                Backend* sides[2] = {&dev, &cpu};
                for (int s = 0; s < 2; ++s) {
                    Backend& be = *sides[s];
                    DeviceTensor x(be, TypeId::F32, k, x_rows, xv, kOddOffset, padded_stride(k));
                    test::IndexTensor ids = test::index_tensor(be, idv);
                    ids.tensor.ne0 = n_used;
                    ids.tensor.ne1 = n;
                    ids.tensor.row_stride = static_cast<size_t>(n_used) * 4;
                    DeviceTensor y(be, TypeId::F32, n_out, n_used * n, kOddOffset, padded_stride(n_out));
                    const Tensor& w_t = (s == 0 ? wd : wc).t;
                    const auto op = [&] { be.matmul_id(w_t, n_expert, x.t(), ids.tensor, y.t()); };
                    if (!runs("matmul_id " + type_name(type), op)) break;
                    CHECK(y.guard_intact());
                    out[s] = y.values();
                }
                if (out[0].empty()) break;
                double worst = 0;
                for (int64_t j = 0; j < n_used * n; ++j) {
                    const int64_t e = idv[j], xr = per_slot ? j : j / n_used;
                    for (int64_t r = 0; r < n_out; ++r) {
                        double magnitude = 0;
                        for (int64_t i = 0; i < k; ++i)
                            magnitude += std::fabs(double{w[(e * n_out + r) * k + i]} * xv[xr * k + i]);
                        const double diff = std::fabs(double{out[0][j * n_out + r]} - out[1][j * n_out + r]);
                        worst = std::max(worst, std::isnan(diff) ? INFINITY : diff / (per_magnitude * magnitude));
                    }
                }
                INFO("worst |dev - cpu| / bound = " << worst);
                CHECK(worst <= 1.0);
                // Batch invariance on the device: token 6 alone.
                const int64_t t = 6;
                const int64_t x1 = per_slot ? n_used : 1;
                DeviceTensor x(dev, TypeId::F32, k, x1,
                               std::vector<float>(xv.begin() + (per_slot ? t * n_used : t) * k,
                                                  xv.begin() + (per_slot ? t * n_used : t) * k + x1 * k));
                const std::vector<int32_t> token_ids(idv.begin() + t * n_used, idv.begin() + (t + 1) * n_used);
                test::IndexTensor ids = test::index_tensor(dev, token_ids);
                ids.tensor.ne0 = n_used;
                DeviceTensor y(dev, TypeId::F32, n_out, n_used);
                dev.matmul_id(wd.t, n_expert, x.t(), ids.tensor, y.t());
                const std::vector<float> alone = y.values();
                CHECK(std::memcmp(alone.data(), out[0].data() + t * n_used * n_out, alone.size() * sizeof(float)) == 0);
            }
        }
    });
}

TEST_CASE("backend ops: add_id, moe_combine and swiglu_oai match the CPU", "[backend-ops]") {
    for_each_device([](Backend& dev, cpu::CpuBackend& cpu) {
        for (const Op op : {Op::AddId, Op::MoeCombine, Op::SwigluOai})
            if (!dev.supports(op, TypeId::F32)) {
                WARN("SKIPPED " << dev.name() << " " << op_name(op) << ": supports() says no");
                return;
            }
        const int64_t ne0 = 300, n_expert = 6, n_used = 4, n = 5;
        std::vector<int32_t> idv;
        for (int64_t j = 0; j < n_used * n; ++j) idv.push_back(static_cast<int32_t>((j * 5 + 1) % n_expert));
        const std::vector<float> av = random_values(ne0 * n_used * n, 26, -3, 3);
        const std::vector<float> bv = random_values(ne0 * n_expert, 27);
        const std::vector<float> wv = random_values(n_used * n, 28, 0, 1);
        // Beyond the limit on both sides (gpt-oss: alpha 1.702, limit 7).
        const std::vector<float> gv = random_values(ne0 * n, 29, -10, 10), uv = random_values(ne0 * n, 30, -10, 10);
        const auto ids_of = [&](Backend& be) {
            test::IndexTensor ids = test::index_tensor(be, idv);
            ids.tensor.ne0 = n_used;
            ids.tensor.ne1 = n;
            ids.tensor.row_stride = static_cast<size_t>(n_used) * 4;
            return ids;
        };
        const Outputs added = run_both(dev, cpu, [&](Backend& be) {
            DeviceTensor a(be, TypeId::F32, ne0, n_used * n, av, kOddOffset, padded_stride(ne0));
            DeviceTensor b(be, TypeId::F32, ne0, n_expert, bv);
            DeviceTensor y(be, TypeId::F32, ne0, n_used * n, kOddOffset, padded_stride(ne0));
            be.add_id(a.t(), b.t(), ids_of(be), y.t());
            CHECK(y.guard_intact());
            return y.values();
        });
        CHECK(test::max_scaled_diff(added.dev, added.cpu) == 0.0);
        const Outputs combined = run_both(dev, cpu, [&](Backend& be) {
            DeviceTensor y(be, TypeId::F32, ne0, n_used * n, av, kOddOffset, padded_stride(ne0));
            DeviceTensor w(be, TypeId::F32, n_used, n, wv);
            DeviceTensor o(be, TypeId::F32, ne0, n, kOddOffset, padded_stride(ne0));
            be.moe_combine(y.t(), w.t(), o.t());
            CHECK(o.guard_intact());
            return o.values();
        });
        CHECK(test::max_scaled_diff(combined.dev, combined.cpu) == 0.0);
        const Outputs swiglu = run_both(dev, cpu, [&](Backend& be) {
            DeviceTensor g(be, TypeId::F32, ne0, n, gv, kOddOffset, padded_stride(ne0));
            DeviceTensor u(be, TypeId::F32, ne0, n, uv);
            DeviceTensor y(be, TypeId::F32, ne0, n);
            be.swiglu_oai(g.t(), u.t(), 1.702f, 7.0f, y.t());
            CHECK(y.guard_intact());
            return y.values();
        });
        CHECK(test::max_scaled_diff(swiglu.dev, swiglu.cpu) <= kSwigluOai);
    });
}

namespace {

// A buffer on `be` holding `fill`.
std::unique_ptr<Buffer> filled(Backend& be, const std::vector<uint8_t>& fill) {
    auto b = be.alloc(fill.size());
    be.upload(*b, 0, fill.data(), fill.size());
    return b;
}

// copy_to from `a` to `b` (either may be the CPU, or the same device): `n` bytes at an odd offset
// land at another, nothing around them moves; an op issued on `a` before the copy is in what is
// copied, and an op on `b` after it sees the bytes.
void check_copy_to(Backend& a, Backend& b) {
    INFO("copy_to " << a.name() << " -> " << b.name());
    const size_t n = 4 * 1000 + 3, src_at = 40, dst_at = 17;
    std::vector<uint8_t> pattern(n + 100);
    std::mt19937 rng(5);
    for (uint8_t& x : pattern) x = static_cast<uint8_t>(rng());
    const std::vector<uint8_t> guard(n + 200, test::kGuardByte);
    auto src = filled(a, pattern);
    auto dst = filled(b, guard);
    a.copy_to(*src, src_at, b, *dst, dst_at, n);
    std::vector<uint8_t> got(guard.size());
    b.download(*dst, 0, got.data(), got.size());
    CHECK(std::equal(got.begin() + dst_at, got.begin() + dst_at + n, pattern.begin() + src_at));
    CHECK(std::all_of(got.begin(), got.begin() + dst_at, [](uint8_t x) { return x == test::kGuardByte; }));
    CHECK(std::all_of(got.begin() + dst_at + n, got.end(), [](uint8_t x) { return x == test::kGuardByte; }));

    // Ordering: y = 2x on a, copied to b, then z = y + y on b.
    const std::vector<float> xv = random_values(1000, 6);
    DeviceTensor x(a, TypeId::F32, 1000, 1, xv), y(a, TypeId::F32, 1000, 1), yb(b, TypeId::F32, 1000, 1),
        z(b, TypeId::F32, 1000, 1);
    a.scale(x.t(), 2.0f, y.t());
    a.copy_to(*y.t().buffer, 0, b, *yb.t().buffer, 0, 4000);
    b.add(yb.t(), yb.t(), z.t());
    const std::vector<float> zv = z.values();
    size_t wrong = 0;
    for (size_t i = 0; i < xv.size(); ++i) wrong += zv[i] != 4.0f * xv[i];
    CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("backend ops: copy_to moves bytes between the device, the CPU and other devices", "[backend-ops]") {
    std::set<std::string> apis;
    std::vector<DeviceInfo> all = test::devices_under_test();
    for (const DeviceInfo& d : all) {
        INFO("device " << d.name);
        cpu::CpuBackend cpu(1);
        Backend& dev = test::shared_test_device(d);
        check_copy_to(dev, cpu);
        check_copy_to(cpu, dev);
        check_copy_to(dev, dev);
        for (const DeviceInfo& other : all)
            if (other.name != d.name) check_copy_to(dev, test::shared_test_device(other));
        apis.insert(d.api);
    }
    // Two logical devices of one physical device (DESKSIDE_VULKAN_SPLIT=2, DESKSIDE_CUDA_SPLIT=2).
    for (const std::string& api : apis) {
        const std::string var = test::split_variable(api);
        const test::ScopedEnv split(var.c_str(), "2");
        INFO(var << "=2");
        std::vector<std::string> names;
        for (const DeviceInfo& d : list_devices())
            if (d.api == api && d.usable) names.push_back(d.name);
        REQUIRE(names.size() >= 2);
        auto first = open_device(names[0]), second = open_device(names[1]);
        check_copy_to(*first, *second);
        check_copy_to(*second, *first);
    }
}

TEST_CASE("backend ops: supports() covers what the engine needs and only what the CPU can check", "[backend-ops]") {
    // The engine's fixed needs: every F32 op (the activations), copy between devices, the default
    // KV cache (F16: set_rows, attention, and copy for a forked sequence's block), and the weight
    // types of the common GGUF files (F32, F16, Q8_0, and Q4_K + Q6_K for Q4_K_M).
    struct Need {
        Op op;
        TypeId type;
    };
    std::vector<Need> needs;
    for (const Op op : {Op::RmsNorm, Op::Rope, Op::Silu, Op::Gelu, Op::Add, Op::Mul, Op::Scale, Op::Copy, Op::CopyTo})
        needs.push_back({op, TypeId::F32});
    for (const Op op : {Op::SetRows, Op::Attention, Op::Copy}) needs.push_back({op, TypeId::F16});
    for (const TypeId t : {TypeId::F32, TypeId::F16, TypeId::Q8_0, TypeId::Q4_K, TypeId::Q6_K}) {
        needs.push_back({Op::Matmul, t});
        needs.push_back({Op::GetRows, t});
    }
    // Mixture-of-experts models (Qwen3-MoE, gpt-oss): the router, the expert matmul of the same
    // weight types, and the F32 ops around it.
    for (const Op op : {Op::MoeRoute, Op::AddId, Op::MoeCombine, Op::SwigluOai}) needs.push_back({op, TypeId::F32});
    for (const TypeId t : {TypeId::F32, TypeId::Q8_0, TypeId::Q4_K, TypeId::Q6_K}) needs.push_back({Op::MatmulId, t});
    for_each_device([&](Backend& dev, cpu::CpuBackend& cpu) {
        for (const Need& need : needs) {
            INFO(op_name(need.op) << " " << type_name(need.type));
            CHECK(dev.supports(need.op, need.type));
        }
        // The op tests above run every claim of a typed operand the CPU has too; a claim the CPU
        // lacks could not be checked at all.
        for (int o = 0; o <= static_cast<int>(Op::SwigluOai); ++o)
            for (const quant::TypeInfo& info : quant::all_types()) {
                INFO(op_name(static_cast<Op>(o)) << " " << info.name);
                if (dev.supports(static_cast<Op>(o), info.id)) CHECK(cpu.supports(static_cast<Op>(o), info.id));
            }
    });
}

}  // namespace deskside::backends
