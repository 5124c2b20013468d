// A backend that runs every op on a device and on the CPU backend, compares the two outputs, then
// copies the device's output into the CPU's copy, so the two stay in lockstep and a difference
// belongs to the op that made it, not to an earlier one. A model run on a MirrorBackend checks a
// device op by op on real shapes and real activations (tests/engine/test_device_mirror.cpp).
//
// Buffers exist on both sides; downloads read the device's. begin_step()/end_step() are not
// forwarded: the comparison downloads after every op, which a device capturing a step (a CUDA
// graph) would not allow, so the device runs every op eagerly here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace deskside::test {

// An op whose output differed by more than the tolerance: its index in the run, its name and
// shapes, and the largest scaled difference.
struct OpDiff {
    int64_t index = -1;
    std::string what;
    double max_abs = 0;
};

// Per op kind (the op and the types that choose its kernel, e.g. "matmul q8_0 m=1"): how many ran,
// how many gave the CPU's bytes exactly, and the largest scaled difference.
struct KindStats {
    int64_t ops = 0;
    int64_t exact = 0;
    double max_diff = 0;
};

class MirrorBackend final : public backends::Backend {
   public:
    // The bound for attention with an F16 V cache (see mirror_backend.cpp).
    static constexpr double kF16AttentionSteps = 2.5e-3;

    // Differences are scaled as the op tests scale them: |a - b| / max(1, |b|).
    MirrorBackend(backends::Backend& device, backends::Backend& cpu, double tolerance)
        : device_(device), cpu_(cpu), tolerance_(tolerance) {}

    std::vector<OpDiff> above;  // ops whose output differs by more than the tolerance, in order
    int64_t ops = 0;
    std::map<std::string, KindStats> kinds;

    backends::Backend& device() const { return device_; }

    std::string name() const override { return "mirror(" + device_.name() + ")"; }
    bool supports(backends::Op op, quant::TypeId type) const override {
        return device_.supports(op, type) && cpu_.supports(op, type);
    }
    std::unique_ptr<backends::Buffer> alloc(size_t n) override;
    std::unique_ptr<backends::Buffer> map_weights(const void* host, size_t n) override;
    // The CPU keeps some matrices row-interleaved (backends/cpu/repack.h), which changes its
    // summation order: the mirror must see the CPU as the engine uses it.
    std::unique_ptr<backends::Buffer> map_weight_matrix(const void* host, quant::TypeId type, int64_t ne0,
                                                        int64_t ne1) override;
    void upload(backends::Buffer& dst, size_t off, const void* src, size_t n) override;
    void download(const backends::Buffer& src, size_t off, void* dst, size_t n) override;

    void get_rows(const backends::Tensor& t, const backends::Tensor& ids, const backends::Tensor& d) override;
    void matmul(const backends::Tensor& w, const backends::Tensor& x, const backends::Tensor& y) override;
    void rms_norm(const backends::Tensor& x, const backends::Tensor& w, float eps, const backends::Tensor& y) override;
    void rope(const backends::Tensor& x, const backends::Tensor& pos, const backends::RopeParams& p) override;
    void attention(const backends::Tensor& q, const backends::KvCacheView& kv, const backends::Tensor& qs,
                   const backends::AttentionParams& p, const backends::Tensor& out) override;
    void silu(const backends::Tensor& x, const backends::Tensor& y) override;
    void gelu(const backends::Tensor& x, const backends::Tensor& y) override;
    void add(const backends::Tensor& a, const backends::Tensor& b, const backends::Tensor& y) override;
    void mul(const backends::Tensor& a, const backends::Tensor& b, const backends::Tensor& y) override;
    void scale(const backends::Tensor& x, float s, const backends::Tensor& y) override;
    void copy(const backends::Tensor& s, const backends::Tensor& d) override;
    void set_rows(const backends::Tensor& s, const backends::Tensor& d, const backends::Tensor& rows) override;
    void moe_route(const backends::Tensor& logits, const backends::MoeRouteParams& p, const backends::Tensor& ids,
                   const backends::Tensor& weights) override;
    void matmul_id(const backends::Tensor& w, int64_t n_expert, const backends::Tensor& x, const backends::Tensor& ids,
                   const backends::Tensor& y) override;
    void add_id(const backends::Tensor& a, const backends::Tensor& b, const backends::Tensor& ids,
                const backends::Tensor& y) override;
    void moe_combine(const backends::Tensor& y, const backends::Tensor& weights, const backends::Tensor& out) override;
    void swiglu_oai(const backends::Tensor& gate, const backends::Tensor& up, float alpha, float limit,
                    const backends::Tensor& y) override;

   private:
    // Compares rows `rows` of dst on both sides within `bound`, then gives the CPU the device's bytes.
    void settle(const std::string& kind, const std::string& what, const backends::Tensor& dst,
                const std::vector<int32_t>& rows, double bound);
    void settle(const std::string& kind, const std::string& what, const backends::Tensor& dst);
    // The same for an I32 index tensor (moe_route's ids), which must match exactly.
    void settle_ids(const std::string& kind, const std::string& what, const backends::Tensor& ids);

    backends::Backend& device_;
    backends::Backend& cpu_;
    double tolerance_;
};

}  // namespace deskside::test
