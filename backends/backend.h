// The one interface a compute device implements (DESIGN.md key decision 2).
//
// A backend owns device memory (Buffer) and runs a fixed set of ops on 2-D views of it (Tensor).
// The engine calls these ops directly, one after another, with no graph in between; a device
// that queues work asynchronously makes results visible by synchronize() and download().
// A new backend implements this header and passes the shared op conformance tests
// (tests/backends/), which compare every op with a scalar reference within a stated tolerance.
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

// A block of device memory. Created by Backend::alloc or Backend::map_weights; freed by
// destruction. Only the backend that created it may use it.
class Buffer {
   public:
    virtual ~Buffer() = default;
    virtual size_t size() const = 0;
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
    // Llama 3.1 GGUFs carry); when present they replace the llama3 computation.
    std::span<const float> freq_factors;
};

// K and V cache of one layer, paged: cache row c = block * block_size + (pos % block_size).
struct KvCacheView {
    Tensor k;  // [n_head_kv * head_dim, n_blocks * block_size] in the cache type
    Tensor v;  // [n_head_kv * head_dim_v, n_blocks * block_size]
    int64_t block_size = 0;
};

// One query row of an attention call: its position and the block table of its sequence.
// It attends to positions max(0, pos - window + 1) ..= pos, which must already be in the cache.
struct AttentionQuery {
    int32_t pos = 0;
    std::span<const int32_t> blocks;
};

struct AttentionParams {
    int64_t n_head = 0;
    int64_t n_head_kv = 0;  // query head h reads KV head h / (n_head / n_head_kv) (GQA)
    int64_t head_dim = 0;
    int64_t head_dim_v = 0;
    float scale = 1.0f;     // applied to q.k before softmax
    int64_t window = 0;     // sliding window in positions; 0 = unlimited
};

class Backend {
   public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;

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
    virtual void upload(Buffer& dst, size_t offset, const void* src, size_t bytes) = 0;
    virtual void download(const Buffer& src, size_t offset, void* dst, size_t bytes) = 0;
    // Waits until every op issued so far has finished.
    virtual void synchronize() = 0;

    // ---- ops (x, a, b, y: F32 unless stated) ----------------------------------------------------
    // dst[:, i] = table row ids[i], converted to F32. table: [ne0, n_rows] any type; dst: [ne0, ids.size()].
    virtual void get_rows(const Tensor& table, std::span<const int32_t> ids, const Tensor& dst) = 0;
    // y = W x: W [k, n_out] any weight type, x [k, m], y [n_out, m]. Activations are quantized
    // to the weight type's vec_dot_type, as llama.cpp does, so quantized results match it.
    virtual void matmul(const Tensor& w, const Tensor& x, const Tensor& y) = 0;
    // y = x / sqrt(mean(x^2) + eps) * weight, per row. weight: [ne0, 1] or empty (no scaling).
    virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) = 0;
    // In place on x [n_head * head_dim, n_tokens]; positions has n_tokens entries.
    virtual void rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& p) = 0;
    // Causal attention of q [n_head * head_dim, n] over the cache; out [n_head * head_dim_v, n].
    virtual void attention(const Tensor& q, const KvCacheView& kv, std::span<const AttentionQuery> queries,
                           const AttentionParams& p, const Tensor& out) = 0;
    // Softmax of each row, in place.
    virtual void softmax(const Tensor& x) = 0;
    virtual void silu(const Tensor& x, const Tensor& y) = 0;
    // GELU, tanh approximation. ref: Hendrycks & Gimpel, arXiv:1606.08415, eq. for GELU(x) ~.
    virtual void gelu(const Tensor& x, const Tensor& y) = 0;
    // y = a + b and y = a * b, element-wise; b may have one row, broadcast over a's rows.
    virtual void add(const Tensor& a, const Tensor& b, const Tensor& y) = 0;
    virtual void mul(const Tensor& a, const Tensor& b, const Tensor& y) = 0;
    virtual void scale(const Tensor& x, float s, const Tensor& y) = 0;
    // dst = src with type conversion (F32 <-> any type with a quantizer); same shape.
    virtual void copy(const Tensor& src, const Tensor& dst) = 0;
    // dst row rows[i] = src row i, converted to dst's type (writes into the KV cache).
    virtual void set_rows(const Tensor& src, const Tensor& dst, std::span<const int32_t> rows) = 0;
};

}  // namespace deskside::backends
