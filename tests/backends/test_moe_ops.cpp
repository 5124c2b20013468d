// The CPU backend's mixture-of-experts ops and attention sinks against computations written here: the
// router's softmax and top-k by hand (in double, with a stable sort for the ties), each expert's matmul as a
// double dot of the dequantized expert rows with the dequantized quantized activations, add_id / moe_combine
// / swiglu_oai element by element, and attention with a sink as a plain softmax over the scores and the sink.
// Also: matmul_id of a row gives the bits of matmul of that row with its expert's matrix mapped alone, a
// token's rows are the same alone and in a batch (batch invariance), at 1 and 3 threads, and bad arguments
// throw naming the op.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "kernel_test_data.h"
#include "op_harness.h"
#include "quant/activation_quant.h"
#include "quant/quant.h"
#include "support/index_args.h"

namespace deskside::backends {
namespace {

using quant::TypeId;
using test::DeviceTensor;
using test::random_values;

std::vector<std::unique_ptr<cpu::CpuBackend>> cpus() {
    std::vector<std::unique_ptr<cpu::CpuBackend>> out;
    out.push_back(std::make_unique<cpu::CpuBackend>(1));
    out.push_back(std::make_unique<cpu::CpuBackend>(3));  // results must not depend on threads
    return out;
}

// An I32 [ne0, ne1] tensor holding `v` (ids of moe_route's shape).
struct IdTensor {
    std::unique_ptr<Buffer> buffer;
    Tensor t;
    IdTensor(Backend& be, const std::vector<int32_t>& v, int64_t ne0, int64_t ne1) {
        buffer = be.alloc(std::max<size_t>(v.size(), 1) * sizeof(int32_t));
        if (!v.empty()) be.upload(*buffer, 0, v.data(), v.size() * sizeof(int32_t));
        t = make_tensor(buffer.get(), 0, TypeId::I32, ne0, ne1);
    }
    std::vector<int32_t> values(Backend& be) const {
        std::vector<int32_t> v(static_cast<size_t>(t.ne0 * t.ne1));
        be.download(*buffer, 0, v.data(), v.size() * sizeof(int32_t));
        return v;
    }
};

// The router by hand: ranks by value (stable: ties keep the lower index first), softmax in double.
struct Routed {
    std::vector<int32_t> ids;
    std::vector<double> weights;
};
Routed route_by_hand(const std::vector<float>& logits, int64_t n_expert, int64_t n_used, MoeGating gating,
                     bool normalize) {
    Routed r;
    const int64_t n = static_cast<int64_t>(logits.size()) / n_expert;
    for (int64_t t = 0; t < n; ++t) {
        const float* l = logits.data() + t * n_expert;
        const auto softmax = [](std::vector<double> v) {
            const double mx = *std::max_element(v.begin(), v.end());
            double z = 0;
            for (double& e : v) z += (e = std::exp(e - mx));
            for (double& e : v) e /= z;
            return v;
        };
        std::vector<double> score(l, l + n_expert);
        if (gating == MoeGating::SoftmaxThenTopK) score = softmax(score);
        std::vector<int32_t> order(static_cast<size_t>(n_expert));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return score[a] > score[b]; });
        std::vector<double> w;
        for (int64_t s = 0; s < n_used; ++s) w.push_back(score[order[s]]);
        if (gating == MoeGating::TopKThenSoftmax) w = softmax(w);
        if (gating == MoeGating::SoftmaxThenTopK && normalize) {
            const double sum = std::accumulate(w.begin(), w.end(), 0.0);
            for (double& e : w) e /= sum;
        }
        r.ids.insert(r.ids.end(), order.begin(), order.begin() + n_used);
        r.weights.insert(r.weights.end(), w.begin(), w.end());
    }
    return r;
}

}  // namespace

TEST_CASE(
    "moe_route: softmax then top-k (normalised or not) and top-k then "
    "softmax, ties to the lower expert",
    "[cpu-ops][moe]") {
    const int64_t n_expert = 16, n = 5;
    std::vector<float> logits = random_values(n_expert * n, 31, -4.0f, 4.0f);
    // Token 3: exact ties (experts 2, 5, 9 share the largest logit, 1 and 12 the next).
    for (int64_t e : {2, 5, 9}) logits[3 * n_expert + e] = 5.0f;
    for (int64_t e : {1, 12}) logits[3 * n_expert + e] = 4.5f;
    for (auto& be : cpus()) {
        for (const int64_t n_used : {int64_t{1}, int64_t{4}, n_expert}) {
            for (const MoeGating gating : {MoeGating::SoftmaxThenTopK, MoeGating::TopKThenSoftmax}) {
                for (const bool normalize : {false, true}) {
                    if (gating == MoeGating::TopKThenSoftmax && normalize) continue;
                    INFO("n_used " << n_used
                                   << (gating == MoeGating::SoftmaxThenTopK ? " softmax-then-top-k"
                                                                            : " top-k-then-softmax")
                                   << (normalize ? " normalised" : "") << " threads " << be->n_threads());
                    DeviceTensor l(*be, TypeId::F32, n_expert, n, logits);
                    IdTensor ids(*be, std::vector<int32_t>(n_used * n, -1), n_used, n);
                    DeviceTensor w(*be, TypeId::F32, n_used, n);
                    MoeRouteParams p{n_expert, n_used, gating, normalize};
                    be->moe_route(l.t(), p, ids.t, w.t());
                    const Routed ref = route_by_hand(logits, n_expert, n_used, gating, normalize);
                    CHECK(ids.values(*be) == ref.ids);
                    CHECK(test::max_abs_diff(w.values(), ref.weights) <= 1e-6);  // weights <= 1: float rounding
                    CHECK(w.guard_intact());
                    if (n_used == 4 && gating == MoeGating::SoftmaxThenTopK) {
                        const std::vector<int32_t> got = ids.values(*be);
                        CHECK(std::vector<int32_t>(got.begin() + 3 * 4, got.begin() + 4 * 4) ==
                              std::vector<int32_t>{2, 5, 9, 1});
                    }
                }
            }
        }
    }
}

namespace {

// The stacked expert matrix [k, n_expert * n_out] of `type` and its dequantized values.
struct Experts {
    std::vector<uint8_t> bytes;
    std::vector<float> values;
};
Experts make_experts(TypeId type, int64_t k, int64_t rows, uint32_t seed) {
    std::mt19937 rng(seed);
    Experts e{test::weight_rows(type, k, rows, false, rng), std::vector<float>(static_cast<size_t>(k * rows))};
    quant::quant_traits(type)->to_float(e.bytes.data(), e.values.data(), k * rows);
    return e;
}

// x as the CPU dots it with `type`: quantized to the vec_dot type and back.
std::vector<float> as_dotted(TypeId type, const std::vector<float>& x, int64_t k) {
    const TypeId act = quant::quant_traits(type)->vec_dot_type;
    if (act == TypeId::F32) return x;
    std::vector<uint8_t> row(quant::row_bytes(act, k));
    std::vector<float> out(x.size());
    for (size_t r = 0; r < x.size() / k; ++r) {
        quant::activation_from_float(act)(x.data() + r * k, row.data(), k);
        quant::quant_traits(act)->to_float(row.data(), out.data() + r * k, k);
    }
    return out;
}

// Random expert ids [n_used, n]: distinct experts per token.
std::vector<int32_t> random_ids(int64_t n_expert, int64_t n_used, int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> out;
    for (int64_t t = 0; t < n; ++t) {
        std::vector<int32_t> all(static_cast<size_t>(n_expert));
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        out.insert(out.end(), all.begin(), all.begin() + n_used);
    }
    return out;
}

bool same_bits(const std::vector<float>& a, const float* b, size_t n) {
    return a.size() >= n && std::memcmp(a.data(), b, n * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE(
    "matmul_id: each row is its expert's matrix times x, matmul's bits, "
    "alone or in a batch",
    "[cpu-ops][moe]") {
    // The expert weight types of ../shared/models/synth-qwen3moe-*.gguf, Q4_0 (an x8 layout with block
    // sums), and the other K-quants llama-quantize's mixes give expert tensors (Q2_K/Q3_K in the low-bit
    // mixes, Q5_K in Q4_K_M/Q5_K_M). n_out 16: each expert whole x8 groups; n_out 12: groups straddle
    // experts.
    for (const TypeId type : {TypeId::F32, TypeId::Q8_0, TypeId::Q4_K, TypeId::Q6_K, TypeId::Q4_0, TypeId::Q2_K,
                              TypeId::Q3_K, TypeId::Q5_K}) {
        for (const int64_t n_out : {int64_t{16}, int64_t{12}}) {
            const int64_t k = 512, n_expert = 6, n_used = 3,
                          n = 70;  // n > 64: an expert's columns span tasks
            INFO(quant::type_info(type).name << " n_out " << n_out);
            const Experts w = make_experts(type, k, n_expert * n_out, 41);
            const std::vector<int32_t> idv = random_ids(n_expert, n_used, n, 42);
            for (const bool per_slot : {false, true}) {
                const int64_t x_rows = per_slot ? n_used * n : n;
                const std::vector<float> xv = random_values(k * x_rows, 43);
                const std::vector<float> xd = as_dotted(type, xv, k);
                for (auto& be : cpus()) {
                    INFO((per_slot ? "x per slot" : "x per token") << ", threads " << be->n_threads());
                    const auto stacked = be->map_weight_matrix(w.bytes.data(), type, k, n_expert * n_out);
                    const Tensor wt = make_tensor(stacked.get(), 0, type, k, n_expert * n_out);
                    DeviceTensor x(*be, TypeId::F32, k, x_rows, xv);
                    IdTensor ids(*be, idv, n_used, n);
                    DeviceTensor y(*be, TypeId::F32, n_out, n_used * n);
                    be->matmul_id(wt, n_expert, x.t(), ids.t, y.t());
                    CHECK(y.guard_intact());
                    const std::vector<float> got = y.values();

                    // Against the dequantized expert rows dotted in double.
                    double worst = 0;
                    for (int64_t t = 0; t < n; ++t)
                        for (int64_t s = 0; s < n_used; ++s) {
                            const int64_t e = idv[t * n_used + s], xr = per_slot ? t * n_used + s : t;
                            for (int64_t r = 0; r < n_out; ++r) {
                                double dot = 0, magnitude = 0;
                                for (int64_t i = 0; i < k; ++i) {
                                    const double p = double{w.values[(e * n_out + r) * k + i]} * xd[xr * k + i];
                                    dot += p;
                                    magnitude += std::fabs(p);
                                }
                                const double diff = std::fabs(got[(t * n_used + s) * n_out + r] - dot);
                                worst = std::max(worst, std::isnan(diff) ? INFINITY : diff / (magnitude + 1e-30));
                            }
                        }
                    INFO("worst |y - ref| / sum |w x| = " << worst);
                    CHECK(worst <= 1e-5);  // float rounding of 512 terms

                    // matmul of each slot's row with its expert's matrix mapped alone: the same bits (the
                    // plain layout where groups straddle experts, as documented).
                    for (const int64_t t : {int64_t{0}, int64_t{37}, n - 1}) {
                        for (int64_t s = 0; s < n_used; ++s) {
                            const int64_t e = idv[t * n_used + s], xr = per_slot ? t * n_used + s : t;
                            const uint8_t* rows = w.bytes.data() + e * n_out * quant::row_bytes(type, k);
                            const auto alone = n_out % 8 == 0
                                                   ? be->map_weight_matrix(rows, type, k, n_out)
                                                   : be->map_weights(rows, quant::row_bytes(type, k) * n_out);
                            DeviceTensor one(*be, TypeId::F32, n_out, 1);
                            be->matmul(make_tensor(alone.get(), 0, type, k, n_out), x.t().rows(xr, 1), one.t());
                            INFO("token " << t << " slot " << s << " expert " << e);
                            CHECK(same_bits(one.values(), got.data() + (t * n_used + s) * n_out, n_out));
                        }
                    }

                    // Batch invariance: token 37 alone gives the rows it had among 70 tokens.
                    const int64_t t = 37;
                    DeviceTensor x1(*be, TypeId::F32, k, per_slot ? n_used : 1,
                                    std::vector<float>(xv.begin() + (per_slot ? t * n_used : t) * k,
                                                       xv.begin() + (per_slot ? t * n_used + n_used : t + 1) * k));
                    IdTensor ids1(*be, std::vector<int32_t>(idv.begin() + t * n_used, idv.begin() + (t + 1) * n_used),
                                  n_used, 1);
                    DeviceTensor y1(*be, TypeId::F32, n_out, n_used);
                    be->matmul_id(wt, n_expert, x1.t(), ids1.t, y1.t());
                    CHECK(same_bits(y1.values(), got.data() + t * n_used * n_out, n_used * n_out));
                }
            }
        }
    }
}

TEST_CASE("matmul_id with n_used = 1 and n_used = n_expert", "[cpu-ops][moe]") {
    const TypeId type = TypeId::Q8_0;
    const int64_t k = 256, n_out = 8, n_expert = 4, n = 3;
    const Experts w = make_experts(type, k, n_expert * n_out, 51);
    const std::vector<float> xv = random_values(k * n, 52);
    cpu::CpuBackend be(2);
    const auto stacked = be.map_weight_matrix(w.bytes.data(), type, k, n_expert * n_out);
    const Tensor wt = make_tensor(stacked.get(), 0, type, k, n_expert * n_out);
    DeviceTensor x(be, TypeId::F32, k, n, xv);
    for (const int64_t n_used : {int64_t{1}, n_expert}) {
        INFO("n_used " << n_used);
        const std::vector<int32_t> idv = random_ids(n_expert, n_used, n, 53);
        IdTensor ids(be, idv, n_used, n);
        DeviceTensor y(be, TypeId::F32, n_out, n_used * n);
        be.matmul_id(wt, n_expert, x.t(), ids.t, y.t());
        const std::vector<float> got = y.values();
        for (int64_t r = 0; r < n_used * n; ++r) {
            const int64_t e = idv[r];
            const auto alone =
                be.map_weight_matrix(w.bytes.data() + e * n_out * quant::row_bytes(type, k), type, k, n_out);
            DeviceTensor one(be, TypeId::F32, n_out, 1);
            be.matmul(make_tensor(alone.get(), 0, type, k, n_out), x.t().rows(r / n_used, 1), one.t());
            CHECK(same_bits(one.values(), got.data() + r * n_out, n_out));
        }
    }
}

TEST_CASE("add_id, moe_combine and swiglu_oai element by element", "[cpu-ops][moe]") {
    const int64_t ne0 = 100, n_expert = 5, n_used = 3, n = 4;
    const std::vector<int32_t> idv = random_ids(n_expert, n_used, n, 61);
    const std::vector<float> av = random_values(ne0 * n_used * n, 62, -3, 3), bv = random_values(ne0 * n_expert, 63);
    const std::vector<float> wv = random_values(n_used * n, 64, 0, 1);
    for (auto& be : cpus()) {
        IdTensor ids(*be, idv, n_used, n);
        DeviceTensor a(*be, TypeId::F32, ne0, n_used * n, av), b(*be, TypeId::F32, ne0, n_expert, bv);
        DeviceTensor w(*be, TypeId::F32, n_used, n, wv);

        DeviceTensor y(*be, TypeId::F32, ne0, n_used * n);
        be->add_id(a.t(), b.t(), ids.t, y.t());
        std::vector<double> ref(av.size());
        for (int64_t r = 0; r < n_used * n; ++r)
            for (int64_t i = 0; i < ne0; ++i) ref[r * ne0 + i] = av[r * ne0 + i] + bv[idv[r] * ne0 + i];
        CHECK(test::max_abs_diff(y.values(), ref) == 0.0);  // one float addition each
        CHECK(y.guard_intact());

        DeviceTensor out(*be, TypeId::F32, ne0, n);
        be->moe_combine(a.t(), w.t(), out.t());
        std::vector<double> comb(static_cast<size_t>(ne0 * n));
        for (int64_t t = 0; t < n; ++t)
            for (int64_t i = 0; i < ne0; ++i) {
                float acc = av[(t * n_used) * ne0 + i] * wv[t * n_used];
                for (int64_t s = 1; s < n_used; ++s) {
                    const volatile float product = av[(t * n_used + s) * ne0 + i] * wv[t * n_used + s];
                    acc = acc + product;
                }
                comb[t * ne0 + i] = acc;
            }
        CHECK(test::max_abs_diff(out.values(), comb) == 0.0);  // products rounded, then summed in order
        CHECK(out.guard_intact());

        // gpt-oss's constants; inputs reach past the limit on both sides.
        const float alpha = 1.702f, limit = 7.0f;
        const std::vector<float> gv = random_values(ne0 * n, 65, -10, 10), uv = random_values(ne0 * n, 66, -10, 10);
        DeviceTensor g(*be, TypeId::F32, ne0, n, gv), u(*be, TypeId::F32, ne0, n, uv), s(*be, TypeId::F32, ne0, n);
        be->swiglu_oai(g.t(), u.t(), alpha, limit, s.t());
        std::vector<double> sw(gv.size());
        for (size_t i = 0; i < gv.size(); ++i) {
            const double x = std::min<double>(gv[i], limit), up = std::clamp<double>(uv[i], -limit, limit);
            sw[i] = x / (1.0 + std::exp(-alpha * x)) * (up + 1.0);
        }
        CHECK(test::max_scaled_diff(s.values(), std::vector<float>(sw.begin(), sw.end())) <= 1e-6);
        CHECK(s.guard_intact());
    }
}

TEST_CASE("attention sinks join the softmax's denominator without a value", "[cpu-ops][moe]") {
    for (auto& be : cpus()) {
        for (const TypeId cache_type : {TypeId::F32, TypeId::F16}) {
            AttentionParams p;
            p.n_head = 4;
            p.n_head_kv = 2;
            p.head_dim = 32;
            p.head_dim_v = 32;
            p.scale = 0.3f;
            const int64_t block = 4, rows = 16, kv_ne0 = p.n_head_kv * p.head_dim;
            DeviceTensor k(*be, cache_type, kv_ne0, rows, random_values(kv_ne0 * rows, 71));
            DeviceTensor v(*be, cache_type, kv_ne0, rows, random_values(kv_ne0 * rows, 72));
            const std::vector<float> kref = k.values(), vref = v.values();
            const KvCacheView kv{k.t(), v.t(), block};
            const std::vector<int32_t> table{3, 1, 0};
            const std::vector<int32_t> pos{0, 5, 10};
            std::vector<test::TestQuery> queries;
            for (int32_t ps : pos) queries.push_back({ps, table});
            const int64_t q_ne0 = p.n_head * p.head_dim, n = static_cast<int64_t>(pos.size());
            const std::vector<float> qv = random_values(q_ne0 * n, 73, -2, 2);
            // Per head: a sink below every score, one among them, one above them all, a huge one.
            const std::vector<float> sink_values{-30.0f, 0.1f, 4.0f, 60.0f};
            DeviceTensor sinks(*be, TypeId::F32, p.n_head, 1, sink_values);
            p.sinks = sinks.t();
            DeviceTensor q(*be, TypeId::F32, q_ne0, n, qv), out(*be, TypeId::F32, q_ne0, n);
            be->attention(q.t(), kv, test::attention_args(*be, queries), p, out.t());
            CHECK(out.guard_intact());
            const std::vector<float> got = out.values();

            std::vector<float> qd(qv);
            if (cache_type == TypeId::F16)
                for (float& e : qd) e = quant::fp16_to_fp32(quant::fp32_to_fp16(e));
            std::vector<double> ref(static_cast<size_t>(q_ne0 * n));
            for (int64_t t = 0; t < n; ++t)
                for (int64_t h = 0; h < p.n_head; ++h) {
                    const int64_t hk = h / (p.n_head / p.n_head_kv);
                    std::vector<double> s;
                    for (int64_t ps = 0; ps <= pos[t]; ++ps) {
                        const int64_t row = table[ps / block] * block + ps % block;
                        double d = 0;
                        for (int64_t i = 0; i < p.head_dim; ++i)
                            d += double{qd[t * q_ne0 + h * p.head_dim + i]} * kref[row * kv_ne0 + hk * p.head_dim + i];
                        s.push_back(d * p.scale);
                    }
                    const double mx = std::max<double>(*std::max_element(s.begin(), s.end()), sink_values[h]);
                    double z = std::exp(sink_values[h] - mx);
                    for (double& e : s) z += (e = std::exp(e - mx));
                    for (int64_t ps = 0; ps <= pos[t]; ++ps) {
                        const int64_t row = table[ps / block] * block + ps % block;
                        for (int64_t i = 0; i < p.head_dim_v; ++i)
                            ref[t * q_ne0 + h * p.head_dim_v + i] +=
                                s[ps] / z * vref[row * kv_ne0 + hk * p.head_dim_v + i];
                    }
                }
            INFO(quant::type_info(cache_type).name << " threads " << be->n_threads());
            // As the attention test without sinks: float rounding (F32), the F16 accumulator (F16).
            CHECK(test::max_abs_diff(got, ref) <= (cache_type == TypeId::F32 ? 1e-5 : 3e-3));
            // Head 3's sink outweighs every score by e^50: its outputs are (almost) zero.
            for (int64_t t = 0; t < n; ++t)
                for (int64_t i = 0; i < p.head_dim_v; ++i)
                    CHECK(std::fabs(got[t * q_ne0 + 3 * p.head_dim_v + i]) < 1e-12);
        }
    }
}

namespace {

// fn throws an E whose message names `op`.
template <class E, class Fn>
void check_throws(Fn&& fn, const char* op) {
    try {
        fn();
        FAIL_CHECK(op << ": no exception");
    } catch (const E& e) {
        CHECK_THAT(e.what(), Catch::Contains(op));
    }
}

}  // namespace

TEST_CASE("mixture-of-experts ops reject bad arguments naming the op", "[cpu-ops][moe]") {
    cpu::CpuBackend be(1);
    const int64_t k = 32, n_out = 8, n_expert = 2, n_used = 2, n = 2;
    const Experts w = make_experts(TypeId::Q8_0, k, n_expert * n_out, 81);
    const auto stacked = be.map_weight_matrix(w.bytes.data(), TypeId::Q8_0, k, n_expert * n_out);
    const Tensor wt = make_tensor(stacked.get(), 0, TypeId::Q8_0, k, n_expert * n_out);
    DeviceTensor x(be, TypeId::F32, k, n, random_values(k * n, 82));
    DeviceTensor f_ids(be, TypeId::F32, n_used, n, std::vector<float>(n_used * n, 0.0f));  // wrong type
    IdTensor ids(be, {0, 1, 1, 0}, n_used, n);
    IdTensor bad_ids(be, {0, 2, 1, 0}, n_used, n);  // expert 2 of 2
    DeviceTensor y(be, TypeId::F32, n_out, n_used * n), y_short(be, TypeId::F32, n_out, n);

    check_throws<std::invalid_argument>([&] { be.matmul_id(wt, n_expert, x.t(), f_ids.t(), y.t()); }, "matmul_id");
    check_throws<std::invalid_argument>([&] { be.matmul_id(wt, n_expert, x.t(), ids.t, y_short.t()); }, "matmul_id");
    check_throws<std::invalid_argument>([&] { be.matmul_id(wt, 3, x.t(), ids.t, y.t()); }, "matmul_id");
    check_throws<std::out_of_range>([&] { be.matmul_id(wt, n_expert, x.t(), bad_ids.t, y.t()); }, "matmul_id");

    DeviceTensor logits(be, TypeId::F32, n_expert, n, random_values(n_expert * n, 83));
    DeviceTensor rw(be, TypeId::F32, n_used, n);
    check_throws<std::invalid_argument>(
        [&] {
            be.moe_route(logits.t(), {n_expert, 3, MoeGating::SoftmaxThenTopK, false}, ids.t, rw.t());
        },
        "moe_route");
    check_throws<std::invalid_argument>(
        [&] {
            be.moe_route(logits.t(), {n_expert, n_used, MoeGating::SoftmaxThenTopK, false}, f_ids.t(), rw.t());
        },
        "moe_route");

    DeviceTensor a(be, TypeId::F32, n_out, n_used * n, random_values(n_out * n_used * n, 84));
    DeviceTensor b(be, TypeId::F32, n_out, n_expert, random_values(n_out * n_expert, 85));
    check_throws<std::invalid_argument>([&] { be.add_id(a.t(), b.t(), ids.t, y_short.t()); }, "add_id");
    check_throws<std::invalid_argument>([&] { be.add_id(a.t(), b.t(), f_ids.t(), y.t()); }, "add_id");
    check_throws<std::invalid_argument>([&] { be.moe_combine(a.t(), rw.t(), y.t()); }, "moe_combine");
    check_throws<std::invalid_argument>([&] { be.swiglu_oai(a.t(), y_short.t(), 1.702f, 7.0f, y.t()); }, "swiglu_oai");
}

}  // namespace deskside::backends
