// The one interface a compute device implements (DESIGN.md key decision 2).
//
// A backend owns device memory (Buffer) and runs a fixed set of ops on 2-D views of it (Tensor).
// The engine calls these ops directly, one after another, with no graph in between; a device
// that queues work asynchronously makes results visible to the host by download() (which waits
// for the work queued before it) and to another device by copy_to().
//
// Everything an op reads lives on the device, the per-step index arguments too: token ids,
// positions, KV-cache rows and attention block tables are I32 tensors the engine uploads once per
// step (Backend::upload) and passes to get_rows, rope, set_rows and attention. No op takes a host
// span, so the ops of one step depend on nothing but device memory and can be recorded once and
// replayed (a CUDA graph) between begin_step() and end_step(). Ops cannot check index values
// that live on a device: the engine validates them before uploading (engine/forward.cpp).
//
// A new backend implements this header, adds one row to the device registry
// (backends/devices.cpp) and passes the shared op conformance suite
// (tests/backends/test_backend_ops.cpp), which compares every op with the CPU backend within a
// tolerance stated per op.
//
// Conventions (ggml's): a Tensor has ne1 rows of ne0 elements; shape[0] = ne0 is the contiguous
// dimension. Activations are F32. Weights may be any type quant::quant_traits() knows. Ops that
// take a batch treat each row as one token; every op computes a row the same way whatever the
// number of rows (batch invariance, DESIGN.md key decision 5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "quant/types.h"

namespace deskside::backends {

class Backend;

// A block of device memory. Created by Backend::alloc or Backend::map_weights; freed by
// destruction. Only the backend that created it (owner()) may use it in ops; a backend checks
// that before reading its own type out of a Buffer (owned_by), so a buffer of another device is
// an error naming both, never a bad cast.
class Buffer {
   public:
    explicit Buffer(const Backend& owner) : owner_(&owner) {}
    virtual ~Buffer() = default;
    virtual size_t size() const = 0;
    const Backend& owner() const { return *owner_; }
    // The bytes in the host's address space when the host can read and write them directly (the
    // CPU backend's memory), else nullptr. copy_to uses it to skip a staging copy.
    virtual uint8_t* host_data() const { return nullptr; }

   private:
    const Backend* owner_;
};

// A 2-D view into a buffer: ne1 rows of ne0 elements of `type`, row r starting at
// offset + r * row_stride bytes. Views do not own memory.
struct Tensor {
    Buffer* buffer = nullptr;
    size_t offset = 0;
    quant::TypeId type = quant::TypeId::F32;
    int64_t ne0 = 0;
    int64_t ne1 = 0;
    size_t row_stride = 0;

    bool empty() const { return buffer == nullptr; }
    int64_t n_elements() const { return ne0 * ne1; }
    // Bytes a contiguous row of ne0 elements takes.
    size_t row_bytes() const { return quant::row_bytes(type, ne0); }
    // Rows [first, first + n).
    Tensor rows(int64_t first, int64_t n) const {
        Tensor t = *this;
        t.offset += static_cast<size_t>(first) * row_stride;
        t.ne1 = n;
        return t;
    }
    // The same bytes seen as rows of `new_ne0` elements; the view must be contiguous and ne0 *
    // ne1 a multiple of new_ne0 (e.g. [n_head * head_dim, n_tokens] as [head_dim, n_head * n_tokens]).
    Tensor reshape(int64_t new_ne0) const {
        Tensor t = *this;
        t.ne1 = ne0 * ne1 / new_ne0;
        t.ne0 = new_ne0;
        t.row_stride = quant::row_bytes(type, new_ne0);
        return t;
    }
};

// A contiguous tensor of ne1 rows of ne0 elements at `offset` in `buffer`.
inline Tensor make_tensor(Buffer* buffer, size_t offset, quant::TypeId type, int64_t ne0, int64_t ne1) {
    return Tensor{buffer, offset, type, ne0, ne1, quant::row_bytes(type, ne0)};
}

enum class RopeScalingType { None, Linear, Yarn, Llama3 };

// Rotary position embedding of one layer. ref: RoFormer (arXiv:2104.09864); YaRN
// (arXiv:2309.00071); Llama 3.1 frequency scaling (as in Meta's reference implementation).
struct RopeParams {
    int64_t n_head = 0;
    int64_t head_dim = 0;
    int64_t n_rot = 0;        // dimensions rotated per head (the first n_rot of each head)
    bool neox = false;        // pairs (i, i + n_rot/2) instead of (2i, 2i + 1)
    float freq_base = 10000.0f;
    RopeScalingType scaling = RopeScalingType::None;
    float scaling_factor = 1.0f;  // linear: positions divided by it; yarn/llama3: context extension
    int64_t orig_ctx = 0;         // yarn / llama3: training context before extension
    float llama3_low_freq_factor = 1.0f;
    float llama3_high_freq_factor = 4.0f;
    float yarn_beta_fast = 32.0f;
    float yarn_beta_slow = 1.0f;
    // Per-frequency divisors (n_rot / 2 values) stored in the model file (rope_freqs.weight, as
    // Llama 3.1 GGUFs carry); when present they replace the llama3 computation. Host memory that
    // outlives the backend's use of these parameters (the model's weights).
    std::span<const float> freq_factors;
    // Positions passed to rope() are in [0, n_ctx): a backend may tabulate the rotation of every
    // position once (the angles are a function of the position and these parameters alone).
    int64_t n_ctx = 0;
    // Multiplies cos and sin (ggml's attn_factor; YaRN's magnitude is multiplied by it): LongRoPE
    // files (Phi-3.5) scale Q and K by rope.scaling.attn_factor this way.
    float attn_factor = 1.0f;
};

// K and V cache of one layer, paged: cache row c = block * block_size + (pos % block_size).
struct KvCacheView {
    Tensor k;  // [n_head_kv * head_dim, n_blocks * block_size] in the cache type
    Tensor v;  // [n_head_kv * head_dim_v, n_blocks * block_size]
    int64_t block_size = 0;
};

// The per-step arguments of attention: one I32 tensor of ne0 words (ne1 = 1). Query i (row i of
// q) is described by words 3i, 3i + 1, 3i + 2 = {pos, t, n_blocks}: it attends to positions
// max(0, pos - window + 1) ..= pos, which must already be in the cache, through the block table
// in words t .. t + n_blocks - 1 of the same tensor (t counts from the tensor's first word; the
// queries of one sequence share one table). n_blocks * block_size > pos.
// attention_args_words gives the size; engine/step_args.h builds it.
constexpr int64_t kAttentionQueryWords = 3;

struct AttentionParams {
    int64_t n_head = 0;
    int64_t n_head_kv = 0;  // query head h reads KV head h / (n_head / n_head_kv) (GQA)
    int64_t head_dim = 0;
    int64_t head_dim_v = 0;
    float scale = 1.0f;     // applied to q.k before softmax
    int64_t window = 0;     // sliding window in positions; 0 = unlimited
    // Attention sinks (gpt-oss): F32 [n_head, 1] on this device, one logit per query head that
    // joins the softmax's denominator (exp(sink - max) added to the sum; the max taken over the
    // scores and the sink) but has no value. Empty = none.
    Tensor sinks;
};

// How a mixture-of-experts router turns its logits into n_used experts per token and their weights.
enum class MoeGating {
    // p = softmax(logits) over all experts; the n_used largest p; weights = those p, divided by
    // their sum when `normalize` (Qwen3-MoE, Mixtral). ref: llama.cpp build_moe_ffn, gating SOFTMAX.
    SoftmaxThenTopK,
    // The n_used largest raw logits; weights = softmax over those n_used (gpt-oss).
    // ref: llama.cpp build_moe_ffn, gating SOFTMAX_WEIGHT.
    TopKThenSoftmax,
};

struct MoeRouteParams {
    int64_t n_expert = 0;  // = logits.ne0
    int64_t n_used = 0;    // experts per token (k)
    MoeGating gating = MoeGating::SoftmaxThenTopK;
    bool normalize = false;  // SoftmaxThenTopK only
};

// The ops of the interface, for supports().
enum class Op {
    GetRows, Matmul, RmsNorm, Rope, Attention, Silu, Gelu, Add, Mul, Scale, Copy, SetRows, CopyTo,
    MoeRoute, MatmulId, AddId, MoeCombine, SwigluOai,
};
const char* op_name(Op op);

class Backend {
   public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // Host threads the backend computes with (the CPU's pool); 0 for a device that computes
    // elsewhere.
    virtual int n_threads() const { return 0; }

    // ---- capabilities ---------------------------------------------------------------------------
    // Whether `op` runs here with `type` as its typed operand: the table of get_rows, the weights
    // of matmul and matmul_id, the destination of copy and set_rows, the K/V cache type of attention (asked
    // for K and for V), F32 for the others. Placement asks before loading anything, so a model
    // this device cannot run is refused (or placed elsewhere) up front, never halfway through
    // loading (as ggml's supports_op).
    virtual bool supports(Op op, quant::TypeId type) const = 0;

    // ---- memory -------------------------------------------------------------------------------
    virtual std::unique_ptr<Buffer> alloc(size_t bytes) = 0;
    // Read-only weights that live in host memory (an mmap) for the lifetime of the returned
    // buffer; a host backend may use them in place, a device backend copies them.
    virtual std::unique_ptr<Buffer> map_weights(const void* host, size_t bytes) = 0;
    // A weight matrix [ne0, ne1] of `type` (contiguous rows, host memory as for map_weights).
    // A backend may keep it in a layout of its own (the CPU backend interleaves Q4_0 / Q4_K rows,
    // backends/cpu/repack.h); every op reads the whole-matrix Tensor made over the returned buffer
    // (make_tensor(buf, 0, type, ne0, ne1)) correctly, but views of some of its rows and byte
    // access (download) are only valid where the layout is the plain one.
    virtual std::unique_ptr<Buffer> map_weight_matrix(const void* host, quant::TypeId type, int64_t ne0, int64_t ne1) {
        return map_weights(host, quant::row_bytes(type, ne0) * static_cast<size_t>(ne1));
    }
    // Host -> device. The source may be reused as soon as upload returns.
    virtual void upload(Buffer& dst, size_t offset, const void* src, size_t bytes) = 0;
    // Device -> host, after every op issued so far has finished.
    virtual void download(const Buffer& src, size_t offset, void* dst, size_t bytes) = 0;
    // This device's bytes to a buffer of `to` (another device, or this one), after every op
    // issued here so far; ops issued on `to` afterwards see them. The default goes through host
    // memory: straight into or out of a buffer the host can address (Buffer::host_data), through
    // a staging copy otherwise. A backend overrides it where the two devices copy directly.
    virtual void copy_to(const Buffer& src, size_t src_offset, Backend& to, Buffer& dst, size_t dst_offset, size_t bytes);

    // Called by the engine around the ops of one step (a forward pass over one batch). A backend
    // that captures or batches work may start and end a capture here; the defaults do nothing.
    // Between the two calls the engine issues only ops (no upload, download or copy_to).
    virtual void begin_step() {}
    virtual void end_step() {}

    // ---- ops (x, a, b, y: F32 unless stated) ----------------------------------------------------
    // dst[:, i] = table row ids[i], converted to F32. table: [ne0, n_rows] any type; ids: I32
    // [n, 1] with every id in [0, n_rows); dst: [ne0, n].
    virtual void get_rows(const Tensor& table, const Tensor& ids, const Tensor& dst) = 0;
    // y = W x: W [k, n_out] any weight type, x [k, m], y [n_out, m]. Activations are quantized
    // to the weight type's vec_dot_type, as llama.cpp does, so quantized results match it.
    virtual void matmul(const Tensor& w, const Tensor& x, const Tensor& y) = 0;
    // y = x / sqrt(mean(x^2) + eps) * weight, per row. weight: [ne0, 1] or empty (no scaling).
    virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) = 0;
    // In place on x [n_head * head_dim, n_tokens]; positions: I32 [n_tokens, 1], each in [0, p.n_ctx).
    virtual void rope(const Tensor& x, const Tensor& positions, const RopeParams& p) = 0;
    // Causal attention of q [n_head * head_dim, n] over the cache; out [n_head * head_dim_v, n];
    // queries: the per-step arguments described at kAttentionQueryWords.
    virtual void attention(const Tensor& q, const KvCacheView& kv, const Tensor& queries, const AttentionParams& p,
                           const Tensor& out) = 0;
    virtual void silu(const Tensor& x, const Tensor& y) = 0;
    // GELU, tanh approximation. ref: Hendrycks & Gimpel, arXiv:1606.08415, eq. for GELU(x) ~.
    virtual void gelu(const Tensor& x, const Tensor& y) = 0;
    // y = a + b and y = a * b, element-wise; b may have one row, broadcast over a's rows.
    virtual void add(const Tensor& a, const Tensor& b, const Tensor& y) = 0;
    virtual void mul(const Tensor& a, const Tensor& b, const Tensor& y) = 0;
    virtual void scale(const Tensor& x, float s, const Tensor& y) = 0;
    // dst = src with type conversion (F32 <-> any type with a quantizer); same shape.
    virtual void copy(const Tensor& src, const Tensor& dst) = 0;
    // dst row rows[i] = src row i, converted to dst's type (writes into the KV cache). rows: I32
    // [src.ne1, 1], each in [0, dst.ne1).
    virtual void set_rows(const Tensor& src, const Tensor& dst, const Tensor& rows) = 0;

    // ---- mixture of experts (ggml's argsort/top-k + mul_mat_id + add_id) ------------------------
    // Expert ids live on the device: no op can check them. The CPU throws std::out_of_range for
    // an id outside [0, n_expert); a GPU backend leaves matmul_id's row unwritten and makes
    // add_id's row NaN. moe_route only writes ids in range.
    // Router: logits [n_expert, n] -> ids I32 [n_used, n] (contiguous), the chosen experts of each
    // token in descending order of weight (ties: the lower expert index first), and weights F32
    // [n_used, n]. SoftmaxThenTopK with normalize divides by the sum clamped to >= 2^-14 (as
    // llama.cpp's build_moe_ffn clamps it).
    virtual void moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) = 0;
    // Expert matmul (ggml's mul_mat_id). w stacks n_expert matrices [k, n_out] (w.ne1 = n_expert *
    // n_out: the whole [k, n_out, n_expert] GGUF tensor, mapped with map_weight_matrix); ids: I32
    // [n_used, n] from moe_route (contiguous); x: [k, n] (every slot of token t reads row t) or
    // [k, n_used * n] (slot s of token t reads row t * n_used + s); y: [n_out, n_used * n], row
    // t * n_used + s = W[ids[s, t]] x. Each row is computed as matmul computes it with that
    // expert's matrix mapped alone (same quantization, same sums): the same bits on the CPU when
    // n_out is a multiple of 8 (backends/cpu/cpu_backend.h says why), and batch invariant.
    // supports(Op::MatmulId, type) asks for w's type.
    virtual void matmul_id(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) = 0;
    // y row r = a row r + b row ids[r] (ids read as n_used * n words in order, i.e. row t *
    // n_used + s takes expert ids[s, t]): per-expert biases. a, y: [ne0, n_used * n]; b: [ne0, n_expert].
    virtual void add_id(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& y) = 0;
    // out[:, t] = sum over s = 0 .. n_used-1, in that order, of y[:, t * n_used + s] * weights[s, t]
    // (each product rounded to F32, then added left to right: ggml's mul then add chain).
    // y: [ne0, n_used * n]; weights: [n_used, n]; out: [ne0, n].
    virtual void moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) = 0;
    // gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
    // y = g / (1 + exp(-alpha g)) * (u + 1). ref: llama.cpp ggml_swiglu_oai. gate, up, y: same shape.
    virtual void swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, const Tensor& y) = 0;
};

[[noreturn]] void throw_foreign_buffer(const Backend& backend, const Buffer& buffer, const char* op);

// Checks that `buffer` belongs to `backend` and returns it as the backend's own buffer type;
// throws std::invalid_argument naming the op and both devices otherwise.
template <class Own>
const Own& owned_by(const Backend& backend, const Buffer& buffer, const char* op) {
    if (&buffer.owner() != &backend) throw_foreign_buffer(backend, buffer, op);
    return static_cast<const Own&>(buffer);
}
template <class Own>
Own& owned_by(const Backend& backend, Buffer& buffer, const char* op) {
    if (&buffer.owner() != &backend) throw_foreign_buffer(backend, buffer, op);
    return static_cast<Own&>(buffer);
}

}  // namespace deskside::backends
