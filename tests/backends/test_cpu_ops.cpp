// Op conformance for the CPU backend against scalar references written here. Outputs start as
// NaN (an element the op skips fails the comparison) and are followed by a guard region (an
// out-of-bounds write fails guard_intact). Tolerances are stated per op. A new backend runs the
// same checks by adding itself to backends_under_test().
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/ops_attention_kernels.h"
#include "op_harness.h"
#include "quant/float16.h"
#include "support/index_args.h"

namespace deskside::backends {
namespace {

using quant::TypeId;
using test::DeviceTensor;
using test::max_abs_diff;
using test::random_values;

std::vector<std::unique_ptr<Backend>> backends_under_test() {
    std::vector<std::unique_ptr<Backend>> out;
    out.push_back(std::make_unique<cpu::CpuBackend>(1));
    out.push_back(std::make_unique<cpu::CpuBackend>(3));  // results must not depend on threads
    return out;
}

// What the reference sees of `v` after a round trip through `type`.
std::vector<float> through(TypeId type, const std::vector<float>& v, int64_t ne0) {
    const quant::QuantTraits* t = quant::quant_traits(type);
    std::vector<uint8_t> bytes(quant::row_bytes(type, ne0));
    std::vector<float> out(v.size());
    for (size_t r = 0; r < v.size() / ne0; ++r) {
        t->from_float(v.data() + r * ne0, bytes.data(), ne0);
        t->to_float(bytes.data(), out.data() + r * ne0, ne0);
    }
    return out;
}

}  // namespace

TEST_CASE("get_rows dequantizes the selected rows", "[cpu-ops]") {
    for (auto& be : backends_under_test()) {
        for (TypeId type : {TypeId::F32, TypeId::F16, TypeId::Q8_0, TypeId::Q4_K}) {
            const int64_t ne0 = 256, n_rows = 9;
            DeviceTensor table(*be, type, ne0, n_rows, random_values(ne0 * n_rows, 1));
            const std::vector<int32_t> ids{3, 0, 8, 3};
            DeviceTensor out(*be, TypeId::F32, ne0, 4);
            be->get_rows(table.t(), test::index_tensor(*be, ids), out.t());
            const std::vector<float> all = table.values();
            std::vector<double> ref;
            for (int32_t id : ids) ref.insert(ref.end(), all.begin() + id * ne0, all.begin() + (id + 1) * ne0);
            CHECK(max_abs_diff(out.values(), ref) == 0.0);  // a copy: exact
            CHECK(out.guard_intact());
        }
    }
}

TEST_CASE("matmul equals a double-precision dot of the dequantized operands", "[cpu-ops]") {
    for (auto& be : backends_under_test()) {
        for (TypeId type : {TypeId::F32, TypeId::F16, TypeId::BF16, TypeId::Q8_0, TypeId::Q4_0, TypeId::Q4_K, TypeId::Q6_K}) {
            const int64_t k = 512, n_out = 37, m = 5;
            DeviceTensor w(*be, type, k, n_out, random_values(k * n_out, 2));
            const std::vector<float> xv = random_values(k * m, 3);
            DeviceTensor x(*be, TypeId::F32, k, m, xv);
            DeviceTensor y(*be, TypeId::F32, n_out, m);
            be->matmul(w.t(), x.t(), y.t());
            const std::vector<float> wv = w.values();
            const std::vector<float> xq = through(quant::quant_traits(type)->vec_dot_type, xv, k);
            std::vector<double> ref(n_out * m);
            for (int64_t j = 0; j < m; ++j)
                for (int64_t r = 0; r < n_out; ++r) {
                    double s = 0;
                    for (int64_t i = 0; i < k; ++i) s += static_cast<double>(wv[r * k + i]) * xq[j * k + i];
                    ref[j * n_out + r] = s;
                }
            // Float sums of 512 products of magnitude <= 1: 1e-3 leaves room for float block
            // scales; an activation quantized one level differently costs ~1e-2 at most.
            const double tol = type == TypeId::F32 || type == TypeId::F16 || type == TypeId::BF16 ? 1e-3 : 2e-2;
            INFO("weight type " << quant::type_info(type).name);
            CHECK(max_abs_diff(y.values(), ref) <= tol);
            CHECK(y.guard_intact());

            // Batch invariance: row 2 computed alone is bit-identical to row 2 of the batch.
            DeviceTensor x1(*be, TypeId::F32, k, 1, std::vector<float>(xv.begin() + 2 * k, xv.begin() + 3 * k));
            DeviceTensor y1(*be, TypeId::F32, n_out, 1);
            be->matmul(w.t(), x1.t(), y1.t());
            const std::vector<float> batched = y.values(), alone = y1.values();
            CHECK(std::equal(alone.begin(), alone.end(), batched.begin() + 2 * n_out));
        }
    }
}

TEST_CASE("rms_norm normalizes each row and applies the weight", "[cpu-ops]") {
    for (auto& be : backends_under_test()) {
        const int64_t ne0 = 300, ne1 = 4;
        const std::vector<float> xv = random_values(ne0 * ne1, 4, -3, 3), wv = random_values(ne0, 5);
        DeviceTensor x(*be, TypeId::F32, ne0, ne1, xv), w(*be, TypeId::F32, ne0, 1, wv), y(*be, TypeId::F32, ne0, ne1);
        const float eps = 1e-5f;
        be->rms_norm(x.t(), w.t(), eps, y.t());
        std::vector<double> ref(xv.size());
        for (int64_t r = 0; r < ne1; ++r) {
            double ss = 0;
            for (int64_t i = 0; i < ne0; ++i) ss += double(xv[r * ne0 + i]) * xv[r * ne0 + i];
            const double s = 1.0 / std::sqrt(ss / ne0 + eps);
            for (int64_t i = 0; i < ne0; ++i) ref[r * ne0 + i] = xv[r * ne0 + i] * s * wv[i];
        }
        CHECK(max_abs_diff(y.values(), ref) <= 1e-5);  // float rounding of O(1) values
        CHECK(y.guard_intact());
    }
}

TEST_CASE("rope rotates pairs by position-dependent angles", "[cpu-ops]") {
    for (auto& be : backends_under_test()) {
        for (bool neox : {false, true}) {
            RopeParams p;
            p.n_head = 3;
            p.head_dim = 16;
            p.n_rot = 12;  // the last 4 dimensions of each head stay as they are
            p.neox = neox;
            p.freq_base = 10000.0f;
            const std::vector<int32_t> pos{0, 1, 7, 50};
            const int64_t ne0 = p.n_head * p.head_dim, n = 4;
            const std::vector<float> xv = random_values(ne0 * n, 6);
            DeviceTensor x(*be, TypeId::F32, ne0, n, xv);
            p.n_ctx = 64;
            be->rope(x.t(), test::index_tensor(*be, pos), p);
            std::vector<double> ref(xv.begin(), xv.end());
            for (int64_t t = 0; t < n; ++t)
                for (int64_t h = 0; h < p.n_head; ++h)
                    for (int64_t i = 0; i < p.n_rot / 2; ++i) {
                        const double theta = pos[t] * std::pow(10000.0, -2.0 * i / p.n_rot);
                        const int64_t base = t * ne0 + h * p.head_dim;
                        const int64_t i0 = base + (neox ? i : 2 * i), i1 = base + (neox ? i + p.n_rot / 2 : 2 * i + 1);
                        ref[i0] = xv[i0] * std::cos(theta) - xv[i1] * std::sin(theta);
                        ref[i1] = xv[i0] * std::sin(theta) + xv[i1] * std::cos(theta);
                    }
            INFO("neox " << neox);
            CHECK(max_abs_diff(x.values(), ref) <= 1e-4);  // float angles up to 50 rad
            CHECK(x.guard_intact());
        }
    }
}

TEST_CASE("attention is causal softmax attention over paged blocks with GQA and a window", "[cpu-ops]") {
    for (auto& be : backends_under_test()) {
        for (TypeId cache_type : {TypeId::F32, TypeId::F16}) {
            AttentionParams p;
            p.n_head = 4;
            p.n_head_kv = 2;
            p.head_dim = 32;
            p.head_dim_v = 32;
            p.scale = 0.3f;
            const int64_t block = 4, n_blocks = 6, rows = block * n_blocks, kv_ne0 = p.n_head_kv * p.head_dim;
            const std::vector<float> kvals = random_values(kv_ne0 * rows, 7), vvals = random_values(kv_ne0 * rows, 8);
            DeviceTensor k(*be, cache_type, kv_ne0, rows, kvals), v(*be, cache_type, kv_ne0, rows, vvals);
            const std::vector<float> kref = k.values(), vref = v.values();
            KvCacheView kv{k.t(), v.t(), block};
            // Sequence positions 0..10 live in blocks 5, 2, 0 (scattered on purpose).
            const std::vector<int32_t> table{5, 2, 0};
            for (int64_t window : {int64_t{0}, int64_t{5}}) {
                p.window = window;
                const std::vector<int32_t> pos{0, 3, 9, 10};
                std::vector<test::TestQuery> queries;
                for (int32_t ps : pos) queries.push_back({ps, table});
                const int64_t q_ne0 = p.n_head * p.head_dim, n = static_cast<int64_t>(pos.size());
                const std::vector<float> qv = random_values(q_ne0 * n, 9, -2, 2);
                DeviceTensor q(*be, TypeId::F32, q_ne0, n, qv), out(*be, TypeId::F32, q_ne0, n);
                be->attention(q.t(), kv, test::attention_args(*be, queries), p, out.t());
                const std::vector<float> qd = through(quant::quant_traits(cache_type)->vec_dot_type, qv, p.head_dim);
                std::vector<double> ref(q_ne0 * n);
                for (int64_t t = 0; t < n; ++t)
                    for (int64_t h = 0; h < p.n_head; ++h) {
                        const int64_t hk = h / (p.n_head / p.n_head_kv);
                        const int64_t first = window > 0 ? std::max<int64_t>(0, pos[t] - window + 1) : 0;
                        std::vector<double> s;
                        for (int64_t ps = first; ps <= pos[t]; ++ps) {
                            const int64_t row = table[ps / block] * block + ps % block;
                            double d = 0;
                            for (int64_t i = 0; i < p.head_dim; ++i)
                                d += double(qd[t * q_ne0 + h * p.head_dim + i]) * kref[row * kv_ne0 + hk * p.head_dim + i];
                            s.push_back(d * p.scale);
                        }
                        const double mx = *std::max_element(s.begin(), s.end());
                        double z = 0;
                        for (double& e : s) z += (e = std::exp(e - mx));
                        for (int64_t ps = first; ps <= pos[t]; ++ps) {
                            const int64_t row = table[ps / block] * block + ps % block;
                            for (int64_t i = 0; i < p.head_dim_v; ++i)
                                ref[t * q_ne0 + h * p.head_dim_v + i] += s[ps - first] / z * vref[row * kv_ne0 + hk * p.head_dim_v + i];
                        }
                    }
                // F32 cache: float rounding only. F16 cache: the V sum is accumulated in F16
                // (as llama.cpp does), a relative 2^-11 per step on values below 1.
                const double tol = cache_type == TypeId::F32 ? 1e-5 : 3e-3;
                INFO("cache " << quant::type_info(cache_type).name << ", window " << window);
                CHECK(max_abs_diff(out.values(), ref) <= tol);
                CHECK(out.guard_intact());
            }
        }
    }
}

TEST_CASE("element-wise ops: silu, gelu, add, mul, scale", "[cpu-ops]") {
    for (auto& be : backends_under_test()) {
        const int64_t ne0 = 200, ne1 = 3;
        const std::vector<float> av = random_values(ne0 * ne1, 10, -4, 4), bv = random_values(ne0, 11, -4, 4);
        DeviceTensor a(*be, TypeId::F32, ne0, ne1, av), b(*be, TypeId::F32, ne0, 1, bv);
        const auto check_unary = [&](const char* name, const std::function<void(const Tensor&, const Tensor&)>& op,
                                     const std::function<double(double)>& f, double tol) {
            DeviceTensor y(*be, TypeId::F32, ne0, ne1);
            op(a.t(), y.t());
            std::vector<double> ref(av.size());
            for (size_t i = 0; i < av.size(); ++i) ref[i] = f(av[i]);
            INFO(name);
            CHECK(max_abs_diff(y.values(), ref) <= tol);
            CHECK(y.guard_intact());
        };
        check_unary("silu", [&](const Tensor& x, const Tensor& y) { be->silu(x, y); },
                    [](double x) { return x / (1 + std::exp(-x)); }, 1e-6);
        // GELU is evaluated at x rounded to F16 and rounded to F16 (llama.cpp's table): a
        // relative 2^-11 on input and output for |x| <= 4.
        check_unary("gelu", [&](const Tensor& x, const Tensor& y) { be->gelu(x, y); },
                    [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }, 5e-3);
        check_unary("scale", [&](const Tensor& x, const Tensor& y) { be->scale(x, 0.37f, y); },
                    [](double x) { return x * 0.37f; }, 1e-6);

        for (bool is_add : {true, false}) {
            DeviceTensor y(*be, TypeId::F32, ne0, ne1);
            if (is_add) be->add(a.t(), b.t(), y.t());
            else be->mul(a.t(), b.t(), y.t());
            std::vector<double> ref(av.size());
            for (size_t i = 0; i < av.size(); ++i) ref[i] = is_add ? av[i] + bv[i % ne0] : double(av[i]) * bv[i % ne0];
            INFO((is_add ? "add" : "mul") << " with a broadcast row");
            CHECK(max_abs_diff(y.values(), ref) <= 1e-5);
            CHECK(y.guard_intact());
        }
    }
}

TEST_CASE("copy and set_rows convert to the destination type", "[cpu-ops]") {
    for (auto& be : backends_under_test()) {
        const int64_t ne0 = 64, ne1 = 5;
        const std::vector<float> xv = random_values(ne0 * ne1, 12, -8, 8);
        DeviceTensor x(*be, TypeId::F32, ne0, ne1, xv);
        for (TypeId type : {TypeId::F16, TypeId::Q8_0}) {
            DeviceTensor half(*be, type, ne0, ne1);
            be->copy(x.t(), half.t());
            const std::vector<float> expect = through(type, xv, ne0);
            CHECK(max_abs_diff(half.values(), std::vector<double>(expect.begin(), expect.end())) == 0.0);
            CHECK(half.guard_intact());
            DeviceTensor back(*be, TypeId::F32, ne0, ne1);
            be->copy(half.t(), back.t());
            CHECK(max_abs_diff(back.values(), std::vector<double>(expect.begin(), expect.end())) == 0.0);
            CHECK(back.guard_intact());
        }
        // set_rows scatters rows 0..2 of x to rows 4, 0, 2 of an F16 table; others keep NaN.
        DeviceTensor table(*be, TypeId::F16, ne0, 6);
        const std::vector<int32_t> rows{4, 0, 2};
        be->set_rows(x.t().rows(0, 3), table.t(), test::index_tensor(*be, rows));
        const std::vector<float> got = table.values(), expect = through(TypeId::F16, xv, ne0);
        for (size_t i = 0; i < rows.size(); ++i)
            for (int64_t e = 0; e < ne0; ++e) CHECK(got[rows[i] * ne0 + e] == expect[i * ne0 + e]);
        for (int64_t r : {1, 3, 5}) CHECK(std::isnan(got[r * ne0]));
        CHECK(table.guard_intact());
    }
}

}  // namespace deskside::backends

namespace deskside::backends {

// The attention inner loops reproduce llama.cpp's summation order (ops_attention_kernels.h); the
// AVX2 versions must give the portable versions' bits exactly, for lengths below, at and past the
// 64-element step, and the dot must still be a dot product (against double, within F32 rounding).
TEST_CASE("attention kernels: AVX2 and portable versions agree to the bit", "[cpu-ops]") {
    for (int64_t n : {8, 32, 64, 72, 128, 200, 256}) {
        INFO("n = " << n);
        const std::vector<float> kf = test::random_values(n, 1), qf = test::random_values(n, 2);
        std::vector<uint16_t> k(n), q(n);
        double exact = 0;
        for (int64_t i = 0; i < n; ++i) {
            k[i] = quant::fp32_to_fp16(kf[i]);
            q[i] = quant::fp32_to_fp16(qf[i]);
            exact += static_cast<double>(quant::fp16_to_fp32(k[i])) * quant::fp16_to_fp32(q[i]);
        }
        const float dot = cpu::attn_dot_f16(n, k.data(), q.data());
        CHECK(std::fabs(dot - exact) <= 1e-5 * n);
        const std::vector<float> v = test::random_values(n, 3);
        for (bool f16 : {false, true}) {
            std::vector<float> a = test::random_values(n, 4);
            if (f16) {
                for (float& x : a) x = quant::fp16_to_fp32(quant::fp32_to_fp16(x));
            }
            std::vector<float> b = a;
            cpu::attn_scale(a.data(), n, 0.37f, f16);
            cpu::attn_accumulate(a.data(), v.data(), 0.61f, n, f16);
            for (int64_t d = 0; d < n; ++d) {
                const float expect = static_cast<float>(static_cast<double>(b[d]) * 0.37f + static_cast<double>(v[d]) * 0.61f);
                CHECK(std::fabs(a[d] - expect) <= (f16 ? 2e-3f : 1e-6f));
            }
            if (!cpu::cpu_features().has_avx2_kernels()) continue;
            cpu::attn_scale_avx2(b.data(), n, 0.37f, f16);
            cpu::attn_accumulate_avx2(b.data(), v.data(), 0.61f, n, f16);
            CHECK(a == b);
        }
        if (cpu::cpu_features().has_avx2_kernels()) CHECK(cpu::attn_dot_f16_avx2(n, k.data(), q.data()) == dot);
    }
}

// Attention runs the loops of the level the process runs at (DESKSIDE_CPU_ISA pins it), not of
// what the CPU has: the portable ones at scalar, the AVX2 ones above.
TEST_CASE("attention kernels: the level selected_isa() names picks the loops", "[cpu-ops]") {
    const cpu::AttnKernels scalar = cpu::attention_kernels(cpu::CpuIsa::Scalar);
    CHECK(scalar.dot_f16 == &cpu::attn_dot_f16);
    CHECK(scalar.scale == &cpu::attn_scale);
    CHECK(scalar.accumulate == &cpu::attn_accumulate);
    CHECK(scalar.widen_f16 == &cpu::attn_f16_to_f32);
    for (cpu::CpuIsa isa : {cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512}) {
        const cpu::AttnKernels simd = cpu::attention_kernels(isa);
        CHECK(simd.dot_f16 == &cpu::attn_dot_f16_avx2);
        CHECK(simd.scale == &cpu::attn_scale_avx2);
        CHECK(simd.accumulate == &cpu::attn_accumulate_avx2);
        CHECK(simd.widen_f16 == &cpu::attn_f16_to_f32_avx2);
    }
}

}  // namespace deskside::backends
