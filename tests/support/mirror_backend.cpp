#include "support/mirror_backend.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "backends/cpu/cpu_backend.h"
#include "quant/quant.h"

namespace deskside::test {
namespace {

using backends::Backend;
using backends::Buffer;
using backends::Tensor;

struct MirrorBuffer final : Buffer {
    explicit MirrorBuffer(const Backend& owner) : Buffer(owner) {}
    std::unique_ptr<Buffer> device, cpu;
    size_t bytes = 0;
    size_t size() const override { return bytes; }
};

MirrorBuffer& mb(const Buffer& b) { return const_cast<MirrorBuffer&>(static_cast<const MirrorBuffer&>(b)); }
Tensor on_device(Tensor t) {
    if (t.buffer) t.buffer = mb(*t.buffer).device.get();
    return t;
}
Tensor on_cpu(Tensor t) {
    if (t.buffer) t.buffer = mb(*t.buffer).cpu.get();
    return t;
}
std::string type_name(const Tensor& t) { return std::string(quant::type_info(t.type).name); }
std::string shape(const Tensor& t) {
    return "[" + std::to_string(t.ne0) + ", " + std::to_string(t.ne1) + "] " + type_name(t) + " @" +
           std::to_string(t.offset) + "/" + std::to_string(t.row_stride);
}
std::vector<int32_t> all_rows(const Tensor& t) {
    std::vector<int32_t> r(static_cast<size_t>(t.ne1));
    for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int32_t>(i);
    return r;
}
std::vector<float> to_f32(const Tensor& t, const std::vector<uint8_t>& row) {
    std::vector<float> out(static_cast<size_t>(t.ne0));
    quant::quant_traits(t.type)->to_float(row.data(), out.data(), t.ne0);
    return out;
}

}  // namespace

std::unique_ptr<Buffer> MirrorBackend::alloc(size_t n) {
    auto b = std::make_unique<MirrorBuffer>(*this);
    b->device = device_.alloc(n);
    b->cpu = cpu_.alloc(n);
    b->bytes = n;
    return b;
}

std::unique_ptr<Buffer> MirrorBackend::map_weights(const void* host, size_t n) {
    auto b = std::make_unique<MirrorBuffer>(*this);
    b->device = device_.map_weights(host, n);
    b->cpu = cpu_.map_weights(host, n);
    b->bytes = n;
    return b;
}

std::unique_ptr<Buffer> MirrorBackend::map_weight_matrix(const void* host, quant::TypeId type, int64_t ne0,
                                                         int64_t ne1) {
    auto b = std::make_unique<MirrorBuffer>(*this);
    b->device = device_.map_weight_matrix(host, type, ne0, ne1);
    b->cpu = cpu_.map_weight_matrix(host, type, ne0, ne1);
    b->bytes = quant::row_bytes(type, ne0) * static_cast<size_t>(ne1);
    return b;
}

void MirrorBackend::upload(Buffer& dst, size_t off, const void* src, size_t n) {
    device_.upload(*mb(dst).device, off, src, n);
    cpu_.upload(*mb(dst).cpu, off, src, n);
}

void MirrorBackend::download(const Buffer& src, size_t off, void* dst, size_t n) {
    device_.download(*mb(src).device, off, dst, n);
}

void MirrorBackend::get_rows(const Tensor& t, const Tensor& ids, const Tensor& d) {
    device_.get_rows(on_device(t), on_device(ids), on_device(d));
    cpu_.get_rows(on_cpu(t), on_cpu(ids), on_cpu(d));
    settle("get_rows " + type_name(t), "get_rows " + shape(t) + " -> " + shape(d), d);
}

void MirrorBackend::matmul(const Tensor& w, const Tensor& x, const Tensor& y) {
    device_.matmul(on_device(w), on_device(x), on_device(y));
    cpu_.matmul(on_cpu(w), on_cpu(x), on_cpu(y));
    settle("matmul " + type_name(w) + (x.ne1 > 1 ? " m>1" : " m=1"),
           "matmul W " + shape(w) + " x " + shape(x) + " -> " + shape(y), y);
}

void MirrorBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) {
    device_.rms_norm(on_device(x), on_device(w), eps, on_device(y));
    cpu_.rms_norm(on_cpu(x), on_cpu(w), eps, on_cpu(y));
    settle("rms_norm", "rms_norm " + shape(x) + " -> " + shape(y), y);
}

void MirrorBackend::rope(const Tensor& x, const Tensor& pos, const backends::RopeParams& p) {
    device_.rope(on_device(x), on_device(pos), p);
    cpu_.rope(on_cpu(x), on_cpu(pos), p);
    settle("rope", "rope " + shape(x), x);
}

void MirrorBackend::attention(const Tensor& q, const backends::KvCacheView& kv, const Tensor& qs,
                              const backends::AttentionParams& p, const Tensor& out) {
    const backends::KvCacheView kv_device{on_device(kv.k), on_device(kv.v), kv.block_size};
    backends::AttentionParams p_device = p, p_cpu = p;  // the sinks live on both sides too
    p_device.sinks = on_device(p.sinks);
    p_cpu.sinks = on_cpu(p.sinks);
    device_.attention(on_device(q), kv_device, on_device(qs), p_device, on_device(out));
    cpu_.attention(on_cpu(q), {on_cpu(kv.k), on_cpu(kv.v), kv.block_size}, on_cpu(qs), p_cpu, on_cpu(out));
    // With an F16 V cache the running sum is rounded to F16 after every position (as llama.cpp's
    // CPU flash attention does); exp()'s few-ulp freedom on the device then moves an accumulator
    // across an F16 rounding step now and then (2^-11 of the running sum, which cancellation
    // between positions can make large against the output): up to 1.3e-3 measured on vulkan0
    // with synth-gemma3, 5.6e-4 with synth-k.
    const bool f16_sum = kv.v.type == quant::TypeId::F16;
    settle("attention k " + type_name(kv.k) + " v " + type_name(kv.v), "attention q " + shape(q) + " -> " + shape(out),
           out, all_rows(out), f16_sum ? std::max(tolerance_, kF16AttentionSteps) : tolerance_);
}

void MirrorBackend::silu(const Tensor& x, const Tensor& y) {
    device_.silu(on_device(x), on_device(y));
    cpu_.silu(on_cpu(x), on_cpu(y));
    settle("silu", "silu " + shape(x), y);
}

void MirrorBackend::gelu(const Tensor& x, const Tensor& y) {
    device_.gelu(on_device(x), on_device(y));
    cpu_.gelu(on_cpu(x), on_cpu(y));
    settle("gelu", "gelu " + shape(x), y);
}

void MirrorBackend::add(const Tensor& a, const Tensor& b, const Tensor& y) {
    device_.add(on_device(a), on_device(b), on_device(y));
    cpu_.add(on_cpu(a), on_cpu(b), on_cpu(y));
    settle("add", "add " + shape(a) + " + " + shape(b), y);
}

void MirrorBackend::mul(const Tensor& a, const Tensor& b, const Tensor& y) {
    device_.mul(on_device(a), on_device(b), on_device(y));
    cpu_.mul(on_cpu(a), on_cpu(b), on_cpu(y));
    settle("mul", "mul " + shape(a) + " * " + shape(b), y);
}

void MirrorBackend::scale(const Tensor& x, float s, const Tensor& y) {
    device_.scale(on_device(x), s, on_device(y));
    cpu_.scale(on_cpu(x), s, on_cpu(y));
    settle("scale", "scale " + shape(x), y);
}

void MirrorBackend::copy(const Tensor& s, const Tensor& d) {
    device_.copy(on_device(s), on_device(d));
    cpu_.copy(on_cpu(s), on_cpu(d));
    settle("copy " + type_name(s) + " -> " + type_name(d), "copy " + shape(s) + " -> " + shape(d), d);
}

void MirrorBackend::set_rows(const Tensor& s, const Tensor& d, const Tensor& rows) {
    device_.set_rows(on_device(s), on_device(d), on_device(rows));
    cpu_.set_rows(on_cpu(s), on_cpu(d), on_cpu(rows));
    const std::span<const int32_t> ids = backends::cpu::host_i32(on_cpu(rows), s.ne1, "mirror set_rows");
    settle("set_rows -> " + type_name(d), "set_rows " + shape(s) + " -> " + shape(d), d,
           std::vector<int32_t>(ids.begin(), ids.end()), tolerance_);
}

void MirrorBackend::moe_route(const Tensor& logits, const backends::MoeRouteParams& p, const Tensor& ids,
                              const Tensor& weights) {
    device_.moe_route(on_device(logits), p, on_device(ids), on_device(weights));
    cpu_.moe_route(on_cpu(logits), p, on_cpu(ids), on_cpu(weights));
    settle_ids("moe_route ids", "moe_route " + shape(logits) + " -> " + shape(ids), ids);
    settle("moe_route weights", "moe_route " + shape(logits) + " -> " + shape(weights), weights);
}

void MirrorBackend::matmul_id(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) {
    device_.matmul_id(on_device(w), n_expert, on_device(x), on_device(ids), on_device(y));
    cpu_.matmul_id(on_cpu(w), n_expert, on_cpu(x), on_cpu(ids), on_cpu(y));
    settle("matmul_id " + type_name(w) + (ids.ne1 > 1 ? " n>1" : " n=1"),
           "matmul_id W " + shape(w) + " x " + shape(x) + " -> " + shape(y), y);
}

void MirrorBackend::add_id(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& y) {
    device_.add_id(on_device(a), on_device(b), on_device(ids), on_device(y));
    cpu_.add_id(on_cpu(a), on_cpu(b), on_cpu(ids), on_cpu(y));
    settle("add_id", "add_id " + shape(a) + " + " + shape(b), y);
}

void MirrorBackend::moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) {
    device_.moe_combine(on_device(y), on_device(weights), on_device(out));
    cpu_.moe_combine(on_cpu(y), on_cpu(weights), on_cpu(out));
    settle("moe_combine", "moe_combine " + shape(y) + " -> " + shape(out), out);
}

void MirrorBackend::swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, const Tensor& y) {
    device_.swiglu_oai(on_device(gate), on_device(up), alpha, limit, on_device(y));
    cpu_.swiglu_oai(on_cpu(gate), on_cpu(up), alpha, limit, on_cpu(y));
    settle("swiglu_oai", "swiglu_oai " + shape(gate), y);
}

void MirrorBackend::settle_ids(const std::string& kind, const std::string& what, const Tensor& ids) {
    const size_t n = static_cast<size_t>(ids.ne0 * ids.ne1) * sizeof(int32_t);  // contiguous, as the ops require
    std::vector<uint8_t> a(n), b(n);
    device_.download(*mb(*ids.buffer).device, ids.offset, a.data(), n);
    cpu_.download(*mb(*ids.buffer).cpu, ids.offset, b.data(), n);
    // A different choice of experts is a different computation downstream: any difference fails.
    if (a != b) above.push_back({ops, what + " (different experts)", INFINITY});
    cpu_.upload(*mb(*ids.buffer).cpu, ids.offset, a.data(), n);
    KindStats& k = kinds[kind];
    ++k.ops;
    k.exact += a == b ? 1 : 0;
    k.max_diff = std::max(k.max_diff, a == b ? 0.0 : INFINITY);
    ++ops;
}

void MirrorBackend::settle(const std::string& kind, const std::string& what, const Tensor& dst) {
    settle(kind, what, dst, all_rows(dst), tolerance_);
}

void MirrorBackend::settle(const std::string& kind, const std::string& what, const Tensor& dst,
                           const std::vector<int32_t>& rows, double bound) {
    const size_t n = dst.row_bytes();
    std::vector<uint8_t> a(n), b(n);
    double worst = 0;
    bool same_bytes = true;
    for (int32_t r : rows) {
        const size_t off = dst.offset + static_cast<size_t>(r) * dst.row_stride;
        device_.download(*mb(*dst.buffer).device, off, a.data(), n);
        cpu_.download(*mb(*dst.buffer).cpu, off, b.data(), n);
        same_bytes = same_bytes && a == b;
        const std::vector<float> fa = to_f32(dst, a), fb = to_f32(dst, b);
        for (size_t i = 0; i < fa.size(); ++i) {
            // Scaled like the op conformance tests: absolute below 1, relative above (gemma3's
            // residual stream reaches the hundreds).
            const double d = std::fabs(double{fa[i]} - fb[i]) / std::max(1.0, std::fabs(double{fb[i]}));
            worst = std::max(worst, std::isnan(d) ? INFINITY : d);
        }
        cpu_.upload(*mb(*dst.buffer).cpu, off, a.data(), n);
    }
    if (worst > bound) above.push_back({ops, what, worst});
    KindStats& k = kinds[kind];
    ++k.ops;
    k.exact += same_bytes ? 1 : 0;
    k.max_diff = std::max(k.max_diff, worst);
    ++ops;
}

}  // namespace deskside::test
