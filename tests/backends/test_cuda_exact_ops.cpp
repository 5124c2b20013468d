// The CUDA backend's per-output arithmetic for every op but the matmuls (backends/cuda/device/
// attention_math.cuh, exact_ops.cuh, moe_math.cuh, hd.cuh's expf_libm), compiled here by the host
// compiler and compared byte for byte (memcmp) with the CPU backend's own op output at its AVX2
// level, the bits the CUDA kernels must give (docs/CUDA.md, "Design"):
// - expf_libm against this machine's expf (glibc's __expf_fma) on a stride of all floats;
// - attention over paged F16, Q8_0 and F32 caches with every V type, GQA, a sliding window, sinks,
//   head sizes with and without the dots' tails, positions around the kernel's chunks of 128 and
//   past 512, emulating the kernel's schedule (scores and steps per chunk, then the walk) at its
//   chunk size and at an odd one, which must not change the bits;
// - rms_norm over 4096-wide rows (and 4103, 128), rope (normal and neox, partial rotation), silu,
//   gelu, swiglu_oai and the router, each over many values.
// The CPU runs in a child process at DESKSIDE_CPU_ISA=avx2 where this one runs at another level.
#include "quant/strict_fp.h"  // first: the device code's float steps must stay unfused here too

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/device/attention_math.cuh"
#include "backends/cuda/device/exact_ops.cuh"
#include "backends/cuda/device/moe_math.cuh"
#include "backends/cuda/device/quantize_activation.cuh"
#include "backends/gelu_table.h"
#include "backends/rope_angles.h"
#include "engine/reference_check.h"
#include "quant/float16.h"
#include "quant/quant.h"
#include "support/index_args.h"

namespace dev = deskside::backends::cuda::device;
namespace be = deskside::backends;
namespace q = deskside::quant;
namespace dt = deskside::test;
using q::TypeId;

namespace {

// A tensor of the CPU backend holding `bytes` (or uninitialised when bytes is null).
struct CpuTensor {
    std::unique_ptr<be::Buffer> buffer;
    be::Tensor t;
};

CpuTensor cpu_tensor(be::cpu::CpuBackend& cpu, TypeId type, int64_t ne0, int64_t ne1, const void* bytes) {
    CpuTensor out;
    const size_t size = q::row_bytes(type, ne0) * static_cast<size_t>(ne1);
    out.buffer = cpu.alloc(std::max<size_t>(size, 1));
    if (bytes) cpu.upload(*out.buffer, 0, bytes, size);
    out.t = be::make_tensor(out.buffer.get(), 0, type, ne0, ne1);
    return out;
}

template <class T>
std::vector<T> cpu_values(be::cpu::CpuBackend& cpu, const CpuTensor& x) {
    std::vector<T> out(static_cast<size_t>(x.t.ne0 * x.t.ne1));
    cpu.download(*x.buffer, 0, out.data(), out.size() * sizeof(T));
    return out;
}

// REQUIREs got == want byte for byte, naming the first value that differs.
void require_same_bytes(const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    size_t at = 0;
    while (at < got.size() && std::memcmp(&got[at], &want[at], sizeof(float)) == 0) ++at;
    INFO("first difference at " << at
                                << (at < got.size() ? ": " + std::to_string(got[at]) + " vs the CPU's " +
                                                          std::to_string(want[at]) + " (bits " +
                                                          std::to_string(std::bit_cast<uint32_t>(got[at])) + " vs " +
                                                          std::to_string(std::bit_cast<uint32_t>(want[at])) + ")"
                                                    : std::string()));
    REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
}

std::vector<float> uniform(size_t n, std::mt19937& rng, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// ---- attention ------------------------------------------------------------------------------------

struct AttentionCase {
    TypeId k_type, v_type;
    int64_t n_head, n_head_kv, head_dim, window;
    bool sinks;
};

// One query, every head, as kernels_attention.cu schedules it, with chunks of `chunk` positions:
// the chunk's scores, then each position's step from the prefix max before it, then the walk.
template <TypeId KType, TypeId VType>
void kernel_attention(const AttentionCase& c, const be::AttentionParams& p, const float* q_row,
                      const std::vector<uint8_t>& k_cache, const std::vector<uint8_t>& v_cache, int64_t block_size,
                      const dt::TestQuery& query, const float* sinks, int chunk, float* out_row) {
    const size_t k_row = q::row_bytes(KType, c.n_head_kv * c.head_dim);
    const size_t v_row = q::row_bytes(VType, c.n_head_kv * c.head_dim);
    const size_t k_head = q::row_bytes(KType, c.head_dim), v_head = q::row_bytes(VType, c.head_dim);
    const auto cache_row = [&](int64_t pos) {
        return static_cast<int64_t>(query.blocks[pos / block_size]) * block_size + pos % block_size;
    };
    for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t hk = h / (c.n_head / c.n_head_kv);
        const float* qh = q_row + h * c.head_dim;
        std::vector<q::BlockQ8_0> q_blocks(static_cast<size_t>(c.head_dim / q::kQK + 1));
        std::vector<float> q_floats(static_cast<size_t>(c.head_dim));
        const void* qd = q_floats.data();
        if constexpr (KType == TypeId::Q8_0) {
            for (int64_t b = 0; b < c.head_dim / q::kQK; ++b) dev::quantize_activation(qh + b * q::kQK, q_blocks[b]);
            qd = q_blocks.data();
        } else {
            for (int64_t d = 0; d < c.head_dim; ++d)
                q_floats[d] = KType == TypeId::F16 ? dev::round_to_f16(qh[d]) : qh[d];
        }
        std::vector<float> acc(static_cast<size_t>(c.head_dim), 0.0f), scores(static_cast<size_t>(chunk));
        std::vector<dev::SoftmaxStep> steps(static_cast<size_t>(chunk));
        float run_max = -INFINITY, sum = 0.0f;
        const int64_t first = c.window > 0 ? std::max<int64_t>(0, query.pos - c.window + 1) : 0;
        for (int64_t start = first; start <= query.pos; start += chunk) {
            const int n = static_cast<int>(std::min<int64_t>(chunk, query.pos - start + 1));
            for (int t = 0; t < n; ++t) {
                const uint8_t* kh = k_cache.data() + cache_row(start + t) * k_row + hk * k_head;
                scores[t] = dev::mul_rn(dev::attn_qk<KType>(qd, kh, c.head_dim), p.scale);
            }
            for (int t = 0; t < n; ++t) {
                float max_before = run_max;
                for (int j = 0; j < t; ++j) max_before = dev::running_max(max_before, scores[j]);
                steps[t] = dev::softmax_step(max_before, scores[t]);
            }
            for (int j = 0; j < n; ++j) {
                run_max = dev::running_max(run_max, scores[j]);
                sum = dev::softmax_sum(sum, steps[j]);
                const uint8_t* vh = v_cache.data() + cache_row(start + j) * v_row + hk * v_head;
                for (int64_t d = 0; d < c.head_dim; ++d)
                    acc[d] = dev::softmax_accumulate(acc[d], dev::attn_v_element<VType>(vh, d), steps[j],
                                                     VType == TypeId::F16);
            }
        }
        dev::SoftmaxStep sink;
        if (sinks) {
            sink = dev::softmax_step(run_max, sinks[h]);
            sum = dev::softmax_sum(sum, sink);
        }
        for (int64_t d = 0; d < c.head_dim; ++d)
            out_row[h * c.head_dim + d] = dev::softmax_output(dev::sink_accumulate(acc[d], sink), sum);
    }
}

// kernel_attention for the runtime cache types, as kernels_attention.cu dispatches them.
template <TypeId KType>
void kernel_attention_v(TypeId v_type, const auto&... args) {
    switch (v_type) {
        case TypeId::F16: kernel_attention<KType, TypeId::F16>(args...); break;
        case TypeId::Q8_0: kernel_attention<KType, TypeId::Q8_0>(args...); break;
        default: kernel_attention<KType, TypeId::F32>(args...); break;
    }
}

void kernel_attention_kv(TypeId k_type, TypeId v_type, const auto&... args) {
    switch (k_type) {
        case TypeId::F16: kernel_attention_v<TypeId::F16>(v_type, args...); break;
        case TypeId::Q8_0: kernel_attention_v<TypeId::Q8_0>(v_type, args...); break;
        default: kernel_attention_v<TypeId::F32>(v_type, args...); break;
    }
}

void check_attention(be::cpu::CpuBackend& cpu, const AttentionCase& c, uint32_t seed) {
    INFO("k " << q::type_info(c.k_type).name << " v " << q::type_info(c.v_type).name << ", heads " << c.n_head << "/"
              << c.n_head_kv << ", dim " << c.head_dim << ", window " << c.window << (c.sinks ? ", sinks" : ""));
    std::mt19937 rng(seed);
    constexpr int64_t kBlockSize = 16, kBlocks = 80;
    const int64_t n_cache = kBlocks * kBlockSize, kv_width = c.n_head_kv * c.head_dim;
    const std::vector<float> k_values = uniform(static_cast<size_t>(kv_width * n_cache), rng, -1.0f, 1.0f);
    const std::vector<float> v_values = uniform(static_cast<size_t>(kv_width * n_cache), rng, -1.0f, 1.0f);
    std::vector<uint8_t> k_cache(q::row_bytes(c.k_type, kv_width) * n_cache);
    std::vector<uint8_t> v_cache(q::row_bytes(c.v_type, kv_width) * n_cache);
    q::quant_traits(c.k_type)->from_float(k_values.data(), k_cache.data(), kv_width * n_cache);
    q::quant_traits(c.v_type)->from_float(v_values.data(), v_cache.data(), kv_width * n_cache);
    // One sequence with a shuffled block table; queries around the chunks (128) and past 512.
    std::vector<int32_t> blocks(kBlocks);
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    std::vector<dt::TestQuery> queries;
    for (int32_t pos : {0, 1, 127, 128, 129, 300, 511, 512, 513, 1100, static_cast<int32_t>(n_cache - 1)})
        queries.push_back({pos, blocks});
    const int64_t n = static_cast<int64_t>(queries.size()), width = c.n_head * c.head_dim;
    const std::vector<float> qv = uniform(static_cast<size_t>(width * n), rng, -2.0f, 2.0f);
    const std::vector<float> sink_values = uniform(static_cast<size_t>(c.n_head), rng, -1.0f, 4.0f);

    be::AttentionParams p;
    p.n_head = c.n_head;
    p.n_head_kv = c.n_head_kv;
    p.head_dim = p.head_dim_v = c.head_dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    p.window = c.window;
    const CpuTensor k = cpu_tensor(cpu, c.k_type, kv_width, n_cache, k_cache.data());
    const CpuTensor v = cpu_tensor(cpu, c.v_type, kv_width, n_cache, v_cache.data());
    const CpuTensor qt = cpu_tensor(cpu, TypeId::F32, width, n, qv.data());
    const CpuTensor out = cpu_tensor(cpu, TypeId::F32, width, n, nullptr);
    const CpuTensor sinks = cpu_tensor(cpu, TypeId::F32, c.n_head, 1, sink_values.data());
    if (c.sinks) p.sinks = sinks.t;
    cpu.attention(qt.t, be::KvCacheView{k.t, v.t, kBlockSize}, dt::attention_args(cpu, queries), p, out.t);
    const std::vector<float> want = cpu_values<float>(cpu, out);

    for (const int chunk : {128, 37}) {
        INFO("chunk " << chunk);
        std::vector<float> got(want.size());
        for (int64_t i = 0; i < n; ++i)
            kernel_attention_kv(c.k_type, c.v_type, c, p, qv.data() + i * width, k_cache, v_cache, kBlockSize,
                                queries[i], c.sinks ? sink_values.data() : nullptr, chunk, got.data() + i * width);
        require_same_bytes(got, want);
    }
}

}  // namespace

TEST_CASE("CUDA exact ops: expf_libm is this machine's expf", "[cuda-device-code]") {
    uint64_t differ = 0, checked = 0;
    const auto check = [&](float x) {
        const float a = dev::expf_libm(x), b = std::exp(x);
        differ += std::memcmp(&a, &b, sizeof(float)) != 0;
        ++checked;
    };
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) check(std::bit_cast<float>(static_cast<uint32_t>(u)));
    for (const float x : {0.0f, -0.0f, 88.0f, 88.72283f, 88.72284f, -103.97f, -104.0f, -150.0f, INFINITY, -INFINITY})
        check(x);
    INFO(differ << " of " << checked << " inputs differ");
    CHECK(differ == 0);
}

TEST_CASE("CUDA exact ops: attention gives the CPU's AVX2 bytes", "[cuda-device-code]") {
    dt::at_cpu_isa(be::cpu::CpuIsa::Avx2, [] {
        be::cpu::CpuBackend cpu(2);
        uint32_t seed = 1;
        for (const TypeId k_type : {TypeId::F16, TypeId::Q8_0, TypeId::F32})
            for (const TypeId v_type : {TypeId::F16, TypeId::Q8_0, TypeId::F32})
                check_attention(cpu, {k_type, v_type, 8, 2, 128, 0, false}, seed++);
        // Sinks, windows, one KV head, and head sizes with the F16 dot's double tail (80) and, for
        // an F32 cache, one 8-step past the 32s (40) and the scalar tail (36, 39).
        check_attention(cpu, {TypeId::F16, TypeId::F16, 8, 2, 64, 0, true}, seed++);
        check_attention(cpu, {TypeId::F16, TypeId::F16, 4, 1, 64, 300, true}, seed++);
        check_attention(cpu, {TypeId::Q8_0, TypeId::Q8_0, 4, 2, 64, 200, false}, seed++);
        check_attention(cpu, {TypeId::F16, TypeId::F16, 4, 2, 80, 0, false}, seed++);
        check_attention(cpu, {TypeId::F32, TypeId::F32, 4, 2, 40, 0, true}, seed++);
        check_attention(cpu, {TypeId::F32, TypeId::F32, 4, 2, 36, 0, true}, seed++);
        check_attention(cpu, {TypeId::F32, TypeId::F32, 4, 2, 39, 0, false}, seed++);
    });
}

TEST_CASE("CUDA exact ops: rms_norm gives the CPU's bytes", "[cuda-device-code]") {
    be::cpu::CpuBackend cpu(2);
    std::mt19937 rng(31);
    for (const int64_t width : {int64_t{4096}, int64_t{4103}, int64_t{128}}) {
        for (const bool weighted : {true, false}) {
            INFO("width " << width << (weighted ? " with weight" : ""));
            constexpr int64_t kRows = 6;
            // Mixed magnitudes (activations have outliers), so the double sum rounds often.
            std::vector<float> x = uniform(static_cast<size_t>(width * kRows), rng, -1.0f, 1.0f);
            for (size_t i = 0; i < x.size(); i += 97) x[i] *= 300.0f;
            for (size_t i = 5; i < x.size(); i += 13) x[i] *= 1e-3f;
            const std::vector<float> w = uniform(static_cast<size_t>(width), rng, 0.5f, 1.5f);
            const float eps = 1e-6f;
            const CpuTensor xt = cpu_tensor(cpu, TypeId::F32, width, kRows, x.data());
            const CpuTensor wt = cpu_tensor(cpu, TypeId::F32, width, 1, w.data());
            const CpuTensor yt = cpu_tensor(cpu, TypeId::F32, width, kRows, nullptr);
            cpu.rms_norm(xt.t, weighted ? wt.t : be::Tensor{}, eps, yt.t);
            std::vector<float> got(x.size());
            for (int64_t r = 0; r < kRows; ++r) {
                const float* in = x.data() + r * width;
                double sum = 0.0;
                for (int64_t i = 0; i < width; ++i) sum = dev::rms_sum_step(sum, in[i]);
                const float scale = dev::rms_norm_scale(sum, width, eps);
                for (int64_t i = 0; i < width; ++i)
                    got[r * width + i] = dev::rms_norm_output(in[i], scale, weighted ? w.data() : nullptr, i);
            }
            require_same_bytes(got, cpu_values<float>(cpu, yt));
        }
    }
}

TEST_CASE("CUDA exact ops: rope gives the CPU's bytes", "[cuda-device-code]") {
    be::cpu::CpuBackend cpu(2);
    std::mt19937 rng(32);
    for (const bool neox : {false, true}) {
        for (const int64_t n_rot : {int64_t{128}, int64_t{64}}) {
            INFO((neox ? "neox" : "normal") << " n_rot " << n_rot);
            be::RopeParams p;
            p.n_head = 4;
            p.head_dim = 128;
            p.n_rot = n_rot;
            p.neox = neox;
            p.freq_base = 500000.0f;
            p.n_ctx = 4096;
            const std::vector<int32_t> positions{0, 1, 17, 511, 2048, 4095};
            const int64_t n = static_cast<int64_t>(positions.size()), width = p.n_head * p.head_dim;
            const std::vector<float> x = uniform(static_cast<size_t>(width * n), rng, -3.0f, 3.0f);
            const CpuTensor xt = cpu_tensor(cpu, TypeId::F32, width, n, x.data());
            cpu.rope(xt.t, dt::index_tensor(cpu, positions), p);
            // The kernel's table: the backend uploads rope_rotation_table(p).
            const std::vector<float> table = be::rope_rotation_table(p);
            std::vector<float> got = x;
            const int64_t half = n_rot / 2;
            for (int64_t t = 0; t < n; ++t)
                for (int64_t h = 0; h < p.n_head; ++h)
                    for (int64_t i = 0; i < half; ++i) {
                        float* v = got.data() + t * width + h * p.head_dim;
                        const float* rot = table.data() + (positions[t] * half + i) * 2;
                        dev::rope_pair(v[neox ? i : 2 * i], v[neox ? i + half : 2 * i + 1], rot[0], rot[1]);
                    }
            require_same_bytes(got, cpu_values<float>(cpu, xt));
        }
    }
}

TEST_CASE("CUDA exact ops: silu, gelu and swiglu_oai give the CPU's bytes", "[cuda-device-code]") {
    be::cpu::CpuBackend cpu(2);
    std::mt19937 rng(33);
    // Random values, a grid of 1/64 steps, and the edges (gelu's saturation, exp's range).
    std::vector<float> x = uniform(1 << 18, rng, -20.0f, 20.0f);
    for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) / 64.0f);
    for (const float e : {0.0f, -0.0f, 10.0f, -10.0f, 9.999999f, -9.999999f, 88.8f, -88.8f, 104.5f, -104.5f})
        x.push_back(e);
    const int64_t n = static_cast<int64_t>(x.size());
    const CpuTensor xt = cpu_tensor(cpu, TypeId::F32, n, 1, x.data());
    const CpuTensor yt = cpu_tensor(cpu, TypeId::F32, n, 1, nullptr);
    std::vector<float> got(x.size());
    SECTION("silu") {
        cpu.silu(xt.t, yt.t);
        for (int64_t i = 0; i < n; ++i) got[i] = dev::silu(x[i]);
        require_same_bytes(got, cpu_values<float>(cpu, yt));
    }
    SECTION("gelu") {
        cpu.gelu(xt.t, yt.t);
        const std::vector<float> table = be::gelu_f16_table();
        for (int64_t i = 0; i < n; ++i) got[i] = dev::gelu(x[i], table.data());
        require_same_bytes(got, cpu_values<float>(cpu, yt));
    }
    SECTION("swiglu_oai") {
        // gpt-oss's constants, with up values straddling the limit.
        const std::vector<float> up = uniform(x.size(), rng, -9.0f, 9.0f);
        const CpuTensor ut = cpu_tensor(cpu, TypeId::F32, n, 1, up.data());
        cpu.swiglu_oai(xt.t, ut.t, 1.702f, 7.0f, yt.t);
        for (int64_t i = 0; i < n; ++i) got[i] = dev::swiglu_oai(x[i], up[i], 1.702f, 7.0f);
        require_same_bytes(got, cpu_values<float>(cpu, yt));
    }
}

TEST_CASE("CUDA exact ops: the router gives the CPU's experts and weights", "[cuda-device-code]") {
    using be::MoeGating;
    be::cpu::CpuBackend cpu(1);
    const int n_expert = 128, n = 64;
    std::mt19937 rng(34);
    std::vector<float> logits = uniform(static_cast<size_t>(n_expert * n), rng, -8.0f, 8.0f);
    for (int e : {3, 17, 40}) logits[5 * n_expert + e] = 9.0f;  // exact ties in token 5
    for (const int n_used : {1, 4, 8}) {
        for (const MoeGating gating : {MoeGating::SoftmaxThenTopK, MoeGating::TopKThenSoftmax}) {
            for (const bool normalize : {false, true}) {
                INFO("n_used " << n_used << " gating " << static_cast<int>(gating) << " normalize " << normalize);
                const CpuTensor lt = cpu_tensor(cpu, TypeId::F32, n_expert, n, logits.data());
                const CpuTensor it = cpu_tensor(cpu, TypeId::I32, n_used, n, nullptr);
                const CpuTensor wt = cpu_tensor(cpu, TypeId::F32, n_used, n, nullptr);
                cpu.moe_route(lt.t, be::MoeRouteParams{n_expert, n_used, gating, normalize}, it.t, wt.t);
                std::vector<int32_t> ids(static_cast<size_t>(n_used * n));
                std::vector<float> w(ids.size());
                for (int t = 0; t < n; ++t)
                    dev::moe_route_token(logits.data() + t * n_expert, n_expert, n_used,
                                         gating == MoeGating::SoftmaxThenTopK, normalize, ids.data() + t * n_used,
                                         w.data() + t * n_used);
                CHECK(ids == cpu_values<int32_t>(cpu, it));
                require_same_bytes(w, cpu_values<float>(cpu, wt));
            }
        }
    }
}
