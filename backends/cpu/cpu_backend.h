// The CPU backend: host memory, a thread pool, and the reference-quality kernels every other
// backend is compared with. Weights are used in place from the model's mmap.
//
// The ops are spread over files by family (ops_quantized.cpp: get_rows / matmul / copy /
// set_rows; ops_norm_rope.cpp; ops_attention.cpp; ops_elementwise.cpp; ops_moe.cpp: the
// mixture-of-experts ops).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/gemm_kernels.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/thread_pool.h"

namespace deskside::backends::cpu {

// Host memory: owned (alloc, repacked weights) or borrowed (map_weights). A weight matrix in an
// x8 layout (repack.h) records it, so that matmul and get_rows read it as such.
class HostBuffer final : public Buffer {
   public:
    HostBuffer(const Backend& owner, uint8_t* data, size_t size, bool owned, WeightLayout layout = WeightLayout::Plain)
        : Buffer(owner), data_(data), size_(size), owned_(owned), layout_(layout) {}
    ~HostBuffer() override;
    size_t size() const override { return size_; }
    uint8_t* host_data() const override { return data_; }
    uint8_t* data() const { return data_; }
    WeightLayout layout() const { return layout_; }

   private:
    uint8_t* data_;
    size_t size_;
    bool owned_;
    WeightLayout layout_;
};

// The first byte of row `row` of t; t must live in host memory (Buffer::host_data), else this
// throws std::invalid_argument.
uint8_t* host_row(const Tensor& t, int64_t row = 0);
// The first n words of an I32 index tensor (Backend::get_rows' ids, rope's positions, set_rows'
// rows, attention's arguments) in host memory; throws std::invalid_argument naming `op` when t is
// not I32, holds fewer than n words in its first row, or is not host memory.
std::span<const int32_t> host_i32(const Tensor& t, int64_t n, const char* op);
inline float* host_f32_row(const Tensor& t, int64_t row = 0) { return reinterpret_cast<float*>(host_row(t, row)); }

// The traits of `type`; throws std::invalid_argument naming `op` for a type quant/ does not know.
const quant::QuantTraits& traits_of(quant::TypeId type, const char* op);
// The x8 layouts are read as whole matrices (a view of some rows would split a group); throws
// std::invalid_argument naming `op` for anything else.
void check_whole_matrix(const Tensor& t, const char* op);

// ---- matmul's machinery, shared by matmul and matmul_id (ops_quantized.cpp) --------------------
// A matmul task: kMatmulRowsPerTask output rows (a multiple of every gemm tile height) times
// up to kMatmulColsPerTask activation rows. The activation block (64 rows: 136 KB of Q8_0 at
// K = 2048) stays in L2 while the task's weight rows (18 KB of Q4_0) stay in L1 and meet it.
inline constexpr int64_t kMatmulRowsPerTask = 16;
inline constexpr int64_t kMatmulColsPerTask = 64;

// The operands of one matmul as its tasks read them: weight rows from `weights` on (a whole
// matrix, or one expert's rows of a stacked one), activation columns already in the weights'
// vec_dot_type, outputs y[c * out_stride + r].
struct MatmulOperands {
    const uint8_t* weights = nullptr;
    size_t w_stride = 0;  // bytes between weight rows
    int64_t k = 0;
    int64_t n_interleaved = 0;  // rows [0, n_interleaved) are x8 groups (repack.h), the rest plain
    int64_t prefetch_rows = 0;  // rows readable from `weights` on (prefetches stop there)
    RepackedGemmFn x8_kernel = nullptr;
    GemmFn gemm = nullptr;  // nullptr: one vec_dot per output (a single column)
    quant::VecDotFn dot = nullptr;
    const uint8_t* act = nullptr;
    size_t act_stride = 0;
    const int16_t* sums = nullptr;  // Q4_0x8: each activation block's integer sum, n_blocks per column
    int64_t n_blocks = 0;
    float* out = nullptr;
    size_t out_stride = 0;  // floats between output columns
};

// Outputs rows [r0, r1) x columns [c0, c0 + nc) of `o`, every one summed in its row's fixed
// order whatever the task shape (batch invariance). `streaming`: the calling thread continues
// with the following rows next (ThreadPool::run_contiguous), so the x8 kernel prefetches on.
void run_matmul_task(const MatmulOperands& o, int64_t r0, int64_t r1, int64_t c0, int64_t nc, bool streaming);

class CpuBackend final : public Backend {
   public:
    // n_threads <= 0 means one per physical core. DESKSIDE_CPU_SPIN_US (microseconds, 0-10000)
    // sets how long idle pool threads spin before sleeping; a bad value throws runtime_error.
    explicit CpuBackend(int n_threads = 0);
    std::string name() const override { return "cpu"; }
    int n_threads() const override { return pool_.size(); }
    // Every op and every type quant/ knows (the reference backend).
    bool supports(Op op, quant::TypeId type) const override;

    std::unique_ptr<Buffer> alloc(size_t bytes) override;
    std::unique_ptr<Buffer> map_weights(const void* host, size_t bytes) override;
    // Q4_0 / Q4_K / Q8_0 / Q6_K matrices are copied into an x8 layout (repack.h, weight_layout_for) and the
    // source pages are handed back to the kernel (madvise MADV_PAGEOUT), so resident memory
    // stays about the model's size; other types are used in place as map_weights does.
    std::unique_ptr<Buffer> map_weight_matrix(const void* host, quant::TypeId type, int64_t ne0, int64_t ne1) override;
    void upload(Buffer& dst, size_t offset, const void* src, size_t bytes) override;
    void download(const Buffer& src, size_t offset, void* dst, size_t bytes) override;

    void get_rows(const Tensor& table, const Tensor& ids, const Tensor& dst) override;
    void matmul(const Tensor& w, const Tensor& x, const Tensor& y) override;
    void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override;
    void rope(const Tensor& x, const Tensor& positions, const RopeParams& p) override;
    void attention(const Tensor& q, const KvCacheView& kv, const Tensor& queries, const AttentionParams& p,
                   const Tensor& out) override;
    void silu(const Tensor& x, const Tensor& y) override;
    void gelu(const Tensor& x, const Tensor& y) override;
    void add(const Tensor& a, const Tensor& b, const Tensor& y) override;
    void mul(const Tensor& a, const Tensor& b, const Tensor& y) override;
    void scale(const Tensor& x, float s, const Tensor& y) override;
    void copy(const Tensor& src, const Tensor& dst) override;
    void set_rows(const Tensor& src, const Tensor& dst, const Tensor& rows) override;

    // The mixture-of-experts ops (ops_moe.cpp). matmul_id reads an x8 (repack.h) stacked matrix by
    // expert: with n_out a multiple of 8 (every MoE model's) each expert's rows are whole groups
    // and its rows give the bits of matmul with that expert's matrix mapped alone; otherwise groups
    // straddle experts and the interleaved rows are unpacked and dotted one at a time (the bits of
    // the plain layout, slower).
    void moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) override;
    void matmul_id(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) override;
    void add_id(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& y) override;
    void moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) override;
    void swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, const Tensor& y) override;

   private:
    // matmul's operands for W and m activation columns, column j being x row x_rows[j] (x's rows
    // in order when x_rows is empty), quantized into activations_; out, gemm and prefetch_rows are
    // the caller's to set.
    MatmulOperands matmul_operands(const Tensor& w, const Tensor& x, std::span<const int32_t> x_rows, int64_t m,
                                   const char* op);

    // Runs fn(i, thread) for every i in [0, n), grouping consecutive items into tasks of at
    // least kMinWorkPerTask (cost counts elements touched or multiply-adds), in parallel when
    // there is more than one task.
    // Interleaved: tasks go to whichever thread is free (ThreadPool::run); Contiguous: each
    // thread first runs its own contiguous share (ThreadPool::run_contiguous).
    enum class Distribution { Interleaved, Contiguous };
    template <class Fn>
    void for_each(int64_t n, int64_t cost_per_item, Distribution distribution, Fn&& fn);
    template <class Fn>
    void for_each(int64_t n, int64_t cost_per_item, Fn&& fn) {
        for_each(n, cost_per_item, Distribution::Interleaved, std::forward<Fn>(fn));
    }
    template <class Fn>
    void for_rows(int64_t n_rows, int64_t elements_per_row, Fn&& fn) {
        for_each(n_rows, elements_per_row, [&](int64_t r, int) { fn(r); });
    }

    ThreadPool pool_;
    // Scratch kept between calls so that steady-state decoding allocates nothing.
    std::vector<uint8_t> activations_;  // matmul: x quantized to the weights' vec_dot_type
    std::vector<int16_t> activation_sums_;  // matmul on Q4_0x8: integer sum of each Q8_0 block
    std::vector<uint8_t> row_scratch_;      // get_rows on x8 layouts: a row in the GGUF layout, per thread
    std::vector<float> attention_scratch_;  // per thread: scores, q in K's dot type, a V row
    std::vector<int32_t> moe_order_;        // matmul_id: output rows grouped by expert, and their x rows
    std::vector<float> router_probs_;       // moe_route, per thread: one token's probabilities
    std::vector<int32_t> router_perm_;      // moe_route, per thread: the experts in rank order
    std::vector<float> moe_outputs_;        // matmul_id: outputs in that order, before the scatter
};

template <class Fn>
void CpuBackend::for_each(int64_t n, int64_t cost_per_item, Distribution distribution, Fn&& fn) {
    // Below this much work a task costs more to hand out than it saves.
    constexpr int64_t kMinWorkPerTask = 32768;
    const int64_t per_task = std::max<int64_t>(1, kMinWorkPerTask / std::max<int64_t>(1, cost_per_item));
    const int64_t n_tasks = (n + per_task - 1) / per_task;
    const auto task_fn = [&](int64_t task, int thread) {
        const int64_t end = std::min(n, (task + 1) * per_task);
        for (int64_t i = task * per_task; i < end; ++i) fn(i, thread);
    };
    if (distribution == Distribution::Contiguous)
        pool_.run_contiguous(n_tasks, task_fn);
    else
        pool_.run(n_tasks, task_fn);
}

}  // namespace deskside::backends::cpu
