// Every op of a real model's forward pass on vulkan0, checked against the CPU backend on the
// same inputs. A mirror backend runs each op on both devices, compares the op's output and then
// copies vulkan0's output into the CPU's copy, so the two stay in lockstep and a difference
// belongs to the op that made it, not to an earlier one.
//
// The engine-level checks only say that logits are off, not where. This one found that the
// stories260K quantized models' 0.16-0.4 gap between vulkan0 and the CPU is not one wrong op:
// every op agrees within 4e-6 (F16-cache attention within a few F16 steps; F16/BF16 matmuls
// since matmul.comp rounds activations as the CPU does), and the gap is the models'
// sensitivity to rounding (docs/VULKAN.md, "Agreement with the CPU").
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/model.h"
#include "models/model.h"
#include "quant/quant.h"
#include "reference_check.h"

namespace deskside::engine {
namespace {

using backends::Backend;
using backends::Buffer;
using backends::Tensor;

struct MirrorBuffer final : Buffer {
    std::unique_ptr<Buffer> device, cpu;
    size_t bytes = 0;
    size_t size() const override { return bytes; }
};

// The worst op found: its index in the step, its name and shapes, and the largest difference.
struct OpDiff {
    int64_t index = -1;
    std::string what;
    double max_abs = 0;
};

class MirrorBackend final : public Backend {
   public:
    static constexpr double kF16AttentionSteps = 2.5e-3;

    MirrorBackend(Backend& device, Backend& cpu, double tolerance) : device_(device), cpu_(cpu), tolerance_(tolerance) {}

    std::vector<OpDiff> above;  // ops whose output differs by more than the tolerance, in order
    int64_t ops = 0;

    std::string name() const override { return "mirror(" + device_.name() + ")"; }
    std::unique_ptr<Buffer> alloc(size_t n) override {
        auto b = std::make_unique<MirrorBuffer>();
        b->device = device_.alloc(n);
        b->cpu = cpu_.alloc(n);
        b->bytes = n;
        return b;
    }
    std::unique_ptr<Buffer> map_weights(const void* host, size_t n) override {
        auto b = std::make_unique<MirrorBuffer>();
        b->device = device_.map_weights(host, n);
        b->cpu = cpu_.map_weights(host, n);
        b->bytes = n;
        return b;
    }
    void upload(Buffer& dst, size_t off, const void* src, size_t n) override {
        device_.upload(*mb(dst).device, off, src, n);
        cpu_.upload(*mb(dst).cpu, off, src, n);
    }
    void download(const Buffer& src, size_t off, void* dst, size_t n) override { device_.download(*mb(src).device, off, dst, n); }
    void synchronize() override { device_.synchronize(); }

    void get_rows(const Tensor& t, std::span<const int32_t> ids, const Tensor& d) override {
        device_.get_rows(on_device(t), ids, on_device(d));
        cpu_.get_rows(on_cpu(t), ids, on_cpu(d));
        settle("get_rows " + shape(t) + " -> " + shape(d), d, all_rows(d));
    }
    void matmul(const Tensor& w, const Tensor& x, const Tensor& y) override {
        device_.matmul(on_device(w), on_device(x), on_device(y));
        cpu_.matmul(on_cpu(w), on_cpu(x), on_cpu(y));
        settle("matmul W " + shape(w) + " x " + shape(x) + " -> " + shape(y), y, all_rows(y));
    }
    void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) override {
        device_.rms_norm(on_device(x), on_device(w), eps, on_device(y));

        cpu_.rms_norm(on_cpu(x), on_cpu(w), eps, on_cpu(y));
        settle("rms_norm " + shape(x) + " -> " + shape(y), y, all_rows(y));
    }
    void rope(const Tensor& x, std::span<const int32_t> pos, const backends::RopeParams& p) override {
        device_.rope(on_device(x), pos, p);
        cpu_.rope(on_cpu(x), pos, p);
        settle("rope " + shape(x), x, all_rows(x));
    }
    void attention(const Tensor& q, const backends::KvCacheView& kv, std::span<const backends::AttentionQuery> qs,
                   const backends::AttentionParams& p, const Tensor& out) override {
        device_.attention(on_device(q), {on_device(kv.k), on_device(kv.v), kv.block_size}, qs, p, on_device(out));
        cpu_.attention(on_cpu(q), {on_cpu(kv.k), on_cpu(kv.v), kv.block_size}, qs, p, on_cpu(out));
        // With an F16 V cache the running sum is rounded to F16 after every position (as
        // llama.cpp's CPU flash attention does); exp()'s few-ulp freedom on the device then moves
        // an accumulator across an F16 rounding step now and then (2^-11 of the running sum, which
        // cancellation between positions can make large against the output): up to 1.3e-3
        // measured on synth-gemma3, 5.6e-4 on synth-k.
        const bool f16_sum = kv.v.type == quant::TypeId::F16;
        settle("attention q " + shape(q) + " -> " + shape(out), out, all_rows(out),
               f16_sum ? std::max(tolerance_, kF16AttentionSteps) : tolerance_);
    }
    void softmax(const Tensor& x) override {
        device_.softmax(on_device(x));
        cpu_.softmax(on_cpu(x));
        settle("softmax " + shape(x), x, all_rows(x));
    }
    void silu(const Tensor& x, const Tensor& y) override {
        device_.silu(on_device(x), on_device(y));
        cpu_.silu(on_cpu(x), on_cpu(y));
        settle("silu " + shape(x), y, all_rows(y));
    }
    void gelu(const Tensor& x, const Tensor& y) override {
        device_.gelu(on_device(x), on_device(y));
        cpu_.gelu(on_cpu(x), on_cpu(y));
        settle("gelu " + shape(x), y, all_rows(y));
    }
    void add(const Tensor& a, const Tensor& b, const Tensor& y) override {
        device_.add(on_device(a), on_device(b), on_device(y));
        cpu_.add(on_cpu(a), on_cpu(b), on_cpu(y));
        settle("add " + shape(a) + " + " + shape(b), y, all_rows(y));
    }
    void mul(const Tensor& a, const Tensor& b, const Tensor& y) override {
        device_.mul(on_device(a), on_device(b), on_device(y));
        cpu_.mul(on_cpu(a), on_cpu(b), on_cpu(y));
        settle("mul " + shape(a) + " * " + shape(b), y, all_rows(y));
    }
    void scale(const Tensor& x, float s, const Tensor& y) override {
        device_.scale(on_device(x), s, on_device(y));
        cpu_.scale(on_cpu(x), s, on_cpu(y));
        settle("scale " + shape(x), y, all_rows(y));
    }
    void copy(const Tensor& s, const Tensor& d) override {
        device_.copy(on_device(s), on_device(d));
        cpu_.copy(on_cpu(s), on_cpu(d));
        settle("copy " + shape(s) + " -> " + shape(d), d, all_rows(d));
    }
    void set_rows(const Tensor& s, const Tensor& d, std::span<const int32_t> rows) override {
        device_.set_rows(on_device(s), on_device(d), rows);
        cpu_.set_rows(on_cpu(s), on_cpu(d), rows);
        settle("set_rows " + shape(s) + " -> " + shape(d), d, std::vector<int32_t>(rows.begin(), rows.end()));
    }

   private:
    static MirrorBuffer& mb(const Buffer& b) { return const_cast<MirrorBuffer&>(static_cast<const MirrorBuffer&>(b)); }
    static Tensor on_device(Tensor t) {
        if (t.buffer) t.buffer = mb(*t.buffer).device.get();
        return t;
    }
    static Tensor on_cpu(Tensor t) {
        if (t.buffer) t.buffer = mb(*t.buffer).cpu.get();
        return t;
    }
    static std::string shape(const Tensor& t) {
        return "[" + std::to_string(t.ne0) + ", " + std::to_string(t.ne1) + "] " + std::string(quant::type_info(t.type).name) +
               " @" + std::to_string(t.offset) + "/" + std::to_string(t.row_stride);
    }
    static std::vector<int32_t> all_rows(const Tensor& t) {
        std::vector<int32_t> r(static_cast<size_t>(t.ne1));
        for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int32_t>(i);
        return r;
    }
    static std::vector<float> to_f32(const Tensor& t, const std::vector<uint8_t>& row) {
        std::vector<float> out(static_cast<size_t>(t.ne0));
        quant::quant_traits(t.type)->to_float(row.data(), out.data(), t.ne0);
        return out;
    }

    // Compares rows `rows` of dst on both devices, then gives the CPU vulkan0's bytes.
    void settle(const std::string& what, const Tensor& dst, const std::vector<int32_t>& rows) {
        settle(what, dst, rows, tolerance_);
    }
    void settle(const std::string& what, const Tensor& dst, const std::vector<int32_t>& rows, double bound) {
        const size_t n = dst.row_bytes();
        std::vector<uint8_t> a(n), b(n);
        double worst = 0;
        for (int32_t r : rows) {
            const size_t off = dst.offset + static_cast<size_t>(r) * dst.row_stride;
            device_.download(*mb(*dst.buffer).device, off, a.data(), n);
            cpu_.download(*mb(*dst.buffer).cpu, off, b.data(), n);
            const std::vector<float> fa = to_f32(dst, a), fb = to_f32(dst, b);
            for (size_t i = 0; i < fa.size(); ++i) {
                // Scaled like the op conformance tests: absolute below 1, relative above
                // (gemma3's residual stream reaches the hundreds).
                const double d = std::fabs(double{fa[i]} - fb[i]) / std::max(1.0, std::fabs(double{fb[i]}));
                worst = std::max(worst, std::isnan(d) ? INFINITY : d);
            }
            cpu_.upload(*mb(*dst.buffer).cpu, off, a.data(), n);
        }
        if (worst > bound) above.push_back({ops, what, worst});
        ++ops;
    }

    Backend& device_;
    Backend& cpu_;
    double tolerance_;
};

// Runs the first reference prompt of `stem` through a mirror of vulkan0 and the CPU, as one
// prompt batch and then one decode token, and CHECKs that no op is off by more than `tolerance`.
void check_ops(const std::string& stem, double tolerance) {
    INFO(stem);
    backends::cpu::CpuBackend cpu(test::kCpuThreads);
    MirrorBackend mirror(test::shared_device("vulkan0"), cpu, tolerance);
    const test::ReferenceRun ref = test::load_reference(stem);
    Model model(models::load_model(test::shared_path("models/" + stem + ".gguf")), mirror);
    const std::vector<int32_t>& prompt = ref.cases.at(0).prompt_tokens;
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i)
        batch.push_back({0, prompt[i], static_cast<int32_t>(i), i + 1 == prompt.size()});
    model.decode(batch);
    const int32_t next = ref.cases.at(0).greedy_tokens.at(0);
    const BatchToken one{0, next, static_cast<int32_t>(prompt.size()), true};
    model.decode(std::span(&one, 1));
    std::ostringstream report;
    for (size_t i = 0; i < std::min<size_t>(mirror.above.size(), 5); ++i)
        report << "op " << mirror.above[i].index << ": " << mirror.above[i].what << ": max diff " << mirror.above[i].max_abs
               << "\n";
    INFO(mirror.above.size() << " of " << mirror.ops << " ops above " << tolerance << ", the first:\n" << report.str());
    CHECK(mirror.above.empty());
}

}  // namespace

TEST_CASE("vulkan0: every op of stories260K-q8_0 equals the CPU's on the same inputs", "[engine][vulkan]") {
    if (!test::device_or_skip("vulkan0", "the op-by-op Vulkan/CPU comparison")) return;
    check_ops("stories260K-q8_0", 1e-4);
}

TEST_CASE("vulkan0: every op of each weight-type family equals the CPU's on the same inputs", "[engine][.vulkan-reference]") {
    if (!test::device_or_skip("vulkan0", "the op-by-op Vulkan/CPU comparison")) return;
    // Q8_1 activations, K-quants (Q8_K activations), biases (qwen2), GeGLU and the extra norms
    // (gemma3). Not here: synth-k-iq4_xs and synth-gemma3-q6_k, where one matmul column is 7e-3
    // off because the CPU backend's AVX2 IQ4_XS / Q6_K dot differs from quant's scalar reference
    // on it (vulkan0 equals the reference; reported to the CPU's owner, docs/VULKAN.md).
    for (const char* stem : {"stories260K-q4_1", "synth-k-q4_k_m", "synth-qwen2-q8_0", "synth-gemma3-q8_0"})
        check_ops(stem, 1e-4);
}

}  // namespace deskside::engine
