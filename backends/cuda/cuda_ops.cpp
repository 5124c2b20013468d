// CudaBackend's ops: each checks its arguments as the Vulkan backend does (std::invalid_argument
// "cuda <op>: ..."), resolves its tensors to device memory, and hands a launch of kernels.h to
// CudaBackend::launch together with the words of its launch arguments (a step's graph key).
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/rope_angles.h"

namespace deskside::backends::cuda {
namespace {

using quant::TypeId;

std::string type_name(TypeId t) { return std::string(quant::type_info(t).name); }

std::string shape_of(const Tensor& t) {
    return "[" + std::to_string(t.ne0) + ", " + std::to_string(t.ne1) + "] " + type_name(t.type);
}

void require(bool ok, const char* op, const std::string& what) {
    if (!ok) throw std::invalid_argument(std::string("cuda ") + op + ": " + what);
}

void require_f32(const Tensor& t, const char* op, const char* name) {
    require(t.type == TypeId::F32 && t.row_stride % 4 == 0 && t.offset % 4 == 0, op,
            std::string(name) + " must be F32 with 4-byte aligned rows, got " + shape_of(t));
}

// Byte alignment the kernels need of a tensor of `type` (the widest element or block field they
// load as one word: 16-bit fp16 scales, F16/BF16 elements, F32 words; MXFP4's 17-byte blocks are
// read byte by byte).
size_t alignment_of(TypeId type) {
    switch (type) {
        case TypeId::F32:
        case TypeId::I32: return 4;
        case TypeId::MXFP4: return 1;
        default: return 2;
    }
}

void require_aligned(const Tensor& t, const char* op, const char* name) {
    const size_t a = alignment_of(t.type);
    require(t.offset % a == 0 && t.row_stride % a == 0, op,
            std::string(name) + " " + shape_of(t) + " must be " + std::to_string(a) + "-byte aligned (offset " +
                std::to_string(t.offset) + ", row stride " + std::to_string(t.row_stride) + ")");
}

// The types copy and set_rows convert between F32 and (quant/'s conversions, bit for bit).
bool convertible(TypeId t) { return t == TypeId::F32 || t == TypeId::F16 || t == TypeId::BF16 || t == TypeId::Q8_0; }

// The ids [n_used, n] of a MoE op as one row of n_used * n words (slot order).
Tensor flat_ids(const Tensor& ids) {
    Tensor t = ids;
    t.ne0 = ids.ne0 * ids.ne1;
    t.ne1 = 1;
    t.row_stride = t.row_bytes();
    return t;
}

// The launch arguments as words, in the order the launch passes them.
class Key {
   public:
    explicit Key(int op) { w_.push_back(static_cast<uint64_t>(op)); }
    Key& add(const DevTensor& t) {
        w_.push_back(reinterpret_cast<uintptr_t>(t.data));
        w_.push_back(static_cast<uint64_t>(t.type));
        w_.push_back(static_cast<uint64_t>(t.ne0));
        w_.push_back(static_cast<uint64_t>(t.ne1));
        w_.push_back(t.row_stride);
        return *this;
    }
    Key& add(const void* p) {
        w_.push_back(reinterpret_cast<uintptr_t>(p));
        return *this;
    }
    Key& add(int64_t v) {
        w_.push_back(static_cast<uint64_t>(v));
        return *this;
    }
    Key& add(float v) {
        w_.push_back(std::bit_cast<uint32_t>(v));
        return *this;
    }
    std::vector<uint64_t> words() { return std::move(w_); }

   private:
    std::vector<uint64_t> w_;
};

}  // namespace

// ---- argument resolution ----------------------------------------------------------------------------

DevTensor CudaBackend::dev(const Tensor& t, const char* op, const char* what) const {
    require(!t.empty(), op, std::string(what) + " is an empty tensor");
    const CudaBuffer& b = owned_by<CudaBuffer>(*this, *t.buffer, op);
    require(t.ne0 >= 0 && t.ne1 >= 0, op, std::string(what) + " has a negative shape " + shape_of(t));
    if (t.ne1 > 0 && t.ne0 > 0) {
        const size_t end = t.offset + static_cast<size_t>(t.ne1 - 1) * t.row_stride + t.row_bytes();
        require(end <= b.size(), op,
                std::string(what) + " " + shape_of(t) + " at offset " + std::to_string(t.offset) + " (stride " +
                    std::to_string(t.row_stride) + ") ends at byte " + std::to_string(end) +
                    ", outside its buffer of " + std::to_string(b.size()));
    }
    return DevTensor{b.data() + t.offset, t.type, t.ne0, t.ne1, t.row_stride};
}

const int32_t* CudaBackend::index(const Tensor& t, int64_t n, const char* op, const char* what) const {
    require(!t.empty() && t.type == TypeId::I32 && t.offset % 4 == 0 && t.ne0 >= n, op,
            std::string(what) + " must be an I32 index tensor of at least " + std::to_string(n) + " entries, got " +
                (t.empty() ? std::string("none") : shape_of(t)));
    const CudaBuffer& b = owned_by<CudaBuffer>(*this, *t.buffer, op);
    require(t.offset + static_cast<size_t>(n) * sizeof(int32_t) <= b.size(), op,
            std::string(what) + " lies outside its buffer of " + std::to_string(b.size()) + " bytes");
    return reinterpret_cast<const int32_t*>(b.data() + t.offset);
}

// ---- capabilities ------------------------------------------------------------------------------

bool CudaBackend::supports(Op op, TypeId type) const {
    switch (op) {
        case Op::GetRows:
        case Op::Matmul:
        case Op::MatmulId: return matmul_supported(type);
        case Op::Attention: return attention_supported(type, type);
        case Op::Copy:
        case Op::SetRows: return convertible(type);
        default: return type == TypeId::F32;
    }
}

// ---- weights ------------------------------------------------------------------------------------

void CudaBackend::get_rows(const Tensor& table, const Tensor& ids, const Tensor& dst) {
    const char* op = "get_rows";
    require(matmul_supported(table.type), op, "unsupported table type " + type_name(table.type));
    require_f32(dst, op, "dst");
    require(dst.ne0 == table.ne0, op, "dst " + shape_of(dst) + " is not as wide as the table " + shape_of(table));
    require_aligned(table, op, "table");
    const DevTensor t = dev(table, op, "table"), d = dev(dst, op, "dst");
    const int64_t n = dst.ne1;
    if (n == 0 || table.ne0 == 0) return;
    const int32_t* id = index(ids, n, op, "ids");
    launch(op, Key(0).add(t).add(id).add(n).add(d).words(), 0,
           [=](cudaStream_t s, void*) { launch_get_rows(s, t, id, n, d); });
}

void CudaBackend::matmul(const Tensor& w, const Tensor& x, const Tensor& y) {
    const char* op = "matmul";
    require(matmul_supported(w.type), op, "unsupported weight type in W " + shape_of(w));
    require(x.type == TypeId::F32 && y.type == TypeId::F32 && x.ne0 == w.ne0 && y.ne0 == w.ne1 && y.ne1 == x.ne1, op,
            "expected W [k, n], x [k, m] f32, y [n, m] f32; got W " + shape_of(w) + ", x " + shape_of(x) + ", y " +
                shape_of(y));
    require_aligned(w, op, "W");
    require_f32(x, op, "x");
    require_f32(y, op, "y");
    const DevTensor dw = dev(w, op, "W"), dx = dev(x, op, "x"), dy = dev(y, op, "y");
    if (w.ne0 == 0 || w.ne1 == 0 || x.ne1 == 0) return;
    const size_t scratch_bytes = matmul_scratch_bytes(w.type, w.ne0, x.ne1);
    launch(op, Key(1).add(dw).add(dx).add(dy).words(), scratch_bytes,
           [=](cudaStream_t s, void* scratch) { launch_matmul(s, dw, dx, dy, scratch); });
}

// ---- norms and rope -------------------------------------------------------------------------------

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
    const char* op = "rms_norm";
    require_f32(x, op, "x");
    require_f32(y, op, "y");
    require(x.ne0 == y.ne0 && x.ne1 == y.ne1, op, "shapes do not match: x " + shape_of(x) + ", y " + shape_of(y));
    DevTensor dw;
    if (!weight.empty()) {
        require_f32(weight, op, "weight");
        require(weight.ne0 == x.ne0 && weight.ne1 >= 1, op,
                "weight " + shape_of(weight) + " does not match x " + shape_of(x));
        dw = dev(weight.rows(0, 1), op, "weight");
    }
    const DevTensor dx = dev(x, op, "x"), dy = dev(y, op, "y");
    if (x.ne1 == 0 || x.ne0 == 0) return;
    launch(op, Key(2).add(dx).add(dw).add(eps).add(dy).words(), 0,
           [=](cudaStream_t s, void*) { launch_rms_norm(s, dx, dw, eps, dy); });
}

const float* CudaBackend::rope_table(const RopeParams& rp) {
    RopeTableKey key = rope_table_key(rp);
    for (const auto& [k, b] : rope_tables_)
        if (k == key) return reinterpret_cast<const float*>(b->data());
    const std::vector<float> rotations = rope_rotation_table(rp);  // the CPU backend's values
    std::unique_ptr<Buffer> b = alloc(rotations.size() * sizeof(float));
    auto* table = static_cast<CudaBuffer*>(b.release());
    rope_tables_.emplace_back(std::move(key), std::unique_ptr<CudaBuffer>(table));
    // Queued now, ahead of the ops of the step being recorded, which read it.
    upload_now(table->data(), rotations.data(), rotations.size() * sizeof(float));
    return reinterpret_cast<const float*>(table->data());
}

void CudaBackend::rope(const Tensor& x, const Tensor& positions, const RopeParams& rp) {
    const char* op = "rope";
    require_f32(x, op, "x");
    require(rp.n_head > 0 && rp.head_dim > 0 && x.ne0 == rp.n_head * rp.head_dim, op,
            "x " + shape_of(x) + " is not n_head * head_dim wide");
    require(rp.n_rot <= rp.head_dim && rp.n_rot % 2 == 0 && rp.n_rot > 0, op,
            "n_rot " + std::to_string(rp.n_rot) + " must be even and at most head_dim " + std::to_string(rp.head_dim));
    require(rp.freq_factors.empty() || static_cast<int64_t>(rp.freq_factors.size()) >= rp.n_rot / 2, op,
            "freq_factors holds " + std::to_string(rp.freq_factors.size()) + " values, n_rot / 2 needed");
    require(rp.n_ctx > 0, op, "n_ctx (the bound on positions) must be set");
    const DevTensor dx = dev(x, op, "x");
    if (x.ne1 == 0) return;
    const int32_t* pos = index(positions, x.ne1, op, "positions");
    const float* table = rope_table(rp);
    // launch_rope reads the shape fields only; the host span must not outlive this call.
    RopeParams shape = rp;
    shape.freq_factors = {};
    launch(op,
           Key(3).add(dx).add(pos).add(table).add(rp.n_head).add(rp.head_dim).add(rp.n_rot)
               .add(static_cast<int64_t>(rp.neox)).add(rp.n_ctx).words(),
           0, [=](cudaStream_t s, void*) { launch_rope(s, dx, pos, table, shape); });
}

// ---- attention ------------------------------------------------------------------------------------

void CudaBackend::attention(const Tensor& q, const KvCacheView& kv, const Tensor& queries, const AttentionParams& p,
                            const Tensor& out) {
    const char* op = "attention";
    require_f32(q, op, "q");
    require_f32(out, op, "out");
    require(q.ne0 == p.n_head * p.head_dim && out.ne0 == p.n_head * p.head_dim_v && out.ne1 == q.ne1, op,
            "q " + shape_of(q) + " / out " + shape_of(out) + " do not match n_head " + std::to_string(p.n_head) +
                " x head_dim " + std::to_string(p.head_dim) + " / head_dim_v " + std::to_string(p.head_dim_v));
    require(p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0, op, "n_head must be a multiple of n_head_kv");
    require(p.window >= 0, op, "window must not be negative");
    require(kv.block_size > 0, op, "block_size must be positive");
    require(attention_supported(kv.k.type, kv.v.type), op,
            "no kernel for a " + type_name(kv.k.type) + " K cache with a " + type_name(kv.v.type) +
                " V cache (supported: f32, f16, q8_0 for each)");
    const int64_t k_block = quant::type_info(kv.k.type).block_size, v_block = quant::type_info(kv.v.type).block_size;
    require(p.head_dim % k_block == 0 && p.head_dim_v % v_block == 0, op,
            "head dimensions must be multiples of the cache types' block sizes");
    require(kv.k.ne0 == p.n_head_kv * p.head_dim && kv.v.ne0 == p.n_head_kv * p.head_dim_v, op,
            "cache rows k " + shape_of(kv.k) + " / v " + shape_of(kv.v) + " do not match n_head_kv x head_dim");
    require(kv.k.ne1 == kv.v.ne1, op, "the K and V caches hold different numbers of rows");
    require_aligned(kv.k, op, "the K cache");
    require_aligned(kv.v, op, "the V cache");
    const DevTensor dq = dev(q, op, "q"), dk = dev(kv.k, op, "the K cache"), dv = dev(kv.v, op, "the V cache"),
                    dout = dev(out, op, "out");
    if (q.ne1 == 0) return;
    require(queries.ne0 >= kAttentionQueryWords * q.ne1, op,
            "the arguments must hold at least " + std::to_string(kAttentionQueryWords) + " words per query, got " +
                shape_of(queries));
    const int32_t* args = index(queries, queries.ne0, op, "the arguments");
    const float* sinks = nullptr;
    if (!p.sinks.empty()) {
        require_f32(p.sinks, op, "sinks");
        const bool contiguous = p.sinks.ne1 == 1 || p.sinks.row_stride == p.sinks.row_bytes();
        require(p.sinks.ne0 * p.sinks.ne1 >= p.n_head && contiguous, op,
                "sinks must hold n_head = " + std::to_string(p.n_head) + " contiguous values, got " +
                    shape_of(p.sinks));
        sinks = reinterpret_cast<const float*>(dev(p.sinks, op, "sinks").data);
    }
    const int64_t block_size = kv.block_size;
    launch(op,
           Key(4).add(dq).add(dk).add(dv).add(block_size).add(args).add(p.n_head).add(p.n_head_kv).add(p.head_dim)
               .add(p.head_dim_v).add(p.scale).add(p.window).add(sinks).add(dout).words(),
           0, [=](cudaStream_t s, void*) { launch_attention(s, dq, dk, dv, block_size, args, p, sinks, dout); });
}

// ---- element-wise ---------------------------------------------------------------------------------

void CudaBackend::silu(const Tensor& x, const Tensor& y) {
    const char* op = "silu";
    require_f32(x, op, "x");
    require_f32(y, op, "y");
    require(x.ne0 == y.ne0 && x.ne1 == y.ne1, op, "shapes do not match: x " + shape_of(x) + ", y " + shape_of(y));
    const DevTensor dx = dev(x, op, "x"), dy = dev(y, op, "y");
    if (x.n_elements() == 0) return;
    launch(op, Key(5).add(dx).add(dy).words(), 0, [=](cudaStream_t s, void*) { launch_silu(s, dx, dy); });
}

void CudaBackend::gelu(const Tensor& x, const Tensor& y) {
    const char* op = "gelu";
    require_f32(x, op, "x");
    require_f32(y, op, "y");
    require(x.ne0 == y.ne0 && x.ne1 == y.ne1, op, "shapes do not match: x " + shape_of(x) + ", y " + shape_of(y));
    const DevTensor dx = dev(x, op, "x"), dy = dev(y, op, "y");
    if (x.n_elements() == 0) return;
    launch(op, Key(6).add(dx).add(dy).words(), 0, [=](cudaStream_t s, void*) { launch_gelu(s, dx, dy); });
}

void CudaBackend::add(const Tensor& a, const Tensor& b, const Tensor& y) {
    const char* op = "add";
    require_f32(a, op, "a");
    require_f32(b, op, "b");
    require_f32(y, op, "y");
    require(a.ne0 == b.ne0 && a.ne0 == y.ne0 && a.ne1 == y.ne1 && (b.ne1 == a.ne1 || b.ne1 == 1), op,
            "shapes do not match: a " + shape_of(a) + ", b " + shape_of(b) + ", y " + shape_of(y));
    const DevTensor da = dev(a, op, "a"), db = dev(b, op, "b"), dy = dev(y, op, "y");
    if (a.n_elements() == 0) return;
    launch(op, Key(7).add(da).add(db).add(dy).words(), 0, [=](cudaStream_t s, void*) { launch_add(s, da, db, dy); });
}

void CudaBackend::mul(const Tensor& a, const Tensor& b, const Tensor& y) {
    const char* op = "mul";
    require_f32(a, op, "a");
    require_f32(b, op, "b");
    require_f32(y, op, "y");
    require(a.ne0 == b.ne0 && a.ne0 == y.ne0 && a.ne1 == y.ne1 && (b.ne1 == a.ne1 || b.ne1 == 1), op,
            "shapes do not match: a " + shape_of(a) + ", b " + shape_of(b) + ", y " + shape_of(y));
    const DevTensor da = dev(a, op, "a"), db = dev(b, op, "b"), dy = dev(y, op, "y");
    if (a.n_elements() == 0) return;
    launch(op, Key(8).add(da).add(db).add(dy).words(), 0, [=](cudaStream_t s, void*) { launch_mul(s, da, db, dy); });
}

void CudaBackend::scale(const Tensor& x, float v, const Tensor& y) {
    const char* op = "scale";
    require_f32(x, op, "x");
    require_f32(y, op, "y");
    require(x.ne0 == y.ne0 && x.ne1 == y.ne1, op, "shapes do not match: x " + shape_of(x) + ", y " + shape_of(y));
    const DevTensor dx = dev(x, op, "x"), dy = dev(y, op, "y");
    if (x.n_elements() == 0) return;
    launch(op, Key(9).add(dx).add(v).add(dy).words(), 0, [=](cudaStream_t s, void*) { launch_scale(s, dx, v, dy); });
}

// ---- copies ---------------------------------------------------------------------------------------

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
    const char* op = "copy";
    require(src.ne0 == dst.ne0 && src.ne1 == dst.ne1, op,
            "shapes do not match: src " + shape_of(src) + ", dst " + shape_of(dst));
    require(src.type == dst.type || (src.type == TypeId::F32 && convertible(dst.type)) ||
                (dst.type == TypeId::F32 && convertible(src.type)),
            op,
            "no conversion from " + type_name(src.type) + " to " + type_name(dst.type) +
                " (supported: the same type, f32 -> f16/bf16/q8_0, f16/bf16/q8_0 -> f32)");
    if (src.type != dst.type) {
        require_aligned(src, op, "src");
        require_aligned(dst, op, "dst");
    }
    const DevTensor ds = dev(src, op, "src"), dd = dev(dst, op, "dst");
    if (src.n_elements() == 0) return;
    launch(op, Key(10).add(ds).add(dd).words(), 0,
           [=](cudaStream_t s, void*) { launch_convert_rows(s, ds, dd, nullptr); });
}

void CudaBackend::set_rows(const Tensor& src, const Tensor& dst, const Tensor& rows) {
    const char* op = "set_rows";
    require_f32(src, op, "src");
    require(src.ne0 == dst.ne0, op, "row widths differ: src " + shape_of(src) + ", dst " + shape_of(dst));
    require(convertible(dst.type), op,
            "no conversion to " + type_name(dst.type) + " (supported: f32, f16, bf16, q8_0)");
    require_aligned(dst, op, "dst");
    const DevTensor ds = dev(src, op, "src"), dd = dev(dst, op, "dst");
    if (src.n_elements() == 0) return;
    const int32_t* r = index(rows, src.ne1, op, "rows");
    launch(op, Key(11).add(ds).add(dd).add(r).words(), 0,
           [=](cudaStream_t s, void*) { launch_convert_rows(s, ds, dd, r); });
}

// ---- mixture of experts ---------------------------------------------------------------------------

namespace {

// The ids [n_used, n] of a MoE op: contiguous I32 (words in slot order).
void require_ids(const Tensor& ids, const char* op) {
    require(!ids.empty() && ids.type == TypeId::I32 && ids.row_stride == ids.row_bytes(), op,
            "ids must be a contiguous I32 tensor [n_used, n], got " +
                (ids.empty() ? std::string("none") : shape_of(ids)));
}

}  // namespace

void CudaBackend::moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) {
    const char* op = "moe_route";
    require_f32(logits, op, "logits");
    require_f32(weights, op, "weights");
    require_ids(ids, op);
    const int64_t n = logits.ne1;
    require(p.n_expert > 0 && logits.ne0 == p.n_expert, op,
            "logits " + shape_of(logits) + " must be n_expert = " + std::to_string(p.n_expert) + " wide");
    require(p.n_used >= 1 && p.n_used <= p.n_expert, op,
            "n_used " + std::to_string(p.n_used) + " must be in [1, n_expert = " + std::to_string(p.n_expert) + "]");
    require(ids.ne0 == p.n_used && ids.ne1 == n && weights.ne0 == p.n_used && weights.ne1 == n, op,
            "ids " + shape_of(ids) + " and weights " + shape_of(weights) + " must be [n_used, n]");
    const DevTensor dl = dev(logits, op, "logits"), dw = dev(weights, op, "weights");
    if (n == 0) return;
    auto* di = const_cast<int32_t*>(index(flat_ids(ids), p.n_used * n, op, "ids"));  // written here
    const size_t ids_stride = ids.row_stride;
    launch(op,
           Key(12).add(dl).add(p.n_expert).add(p.n_used).add(static_cast<int64_t>(p.gating))
               .add(static_cast<int64_t>(p.normalize)).add(di).add(dw).words(),
           0, [=](cudaStream_t s, void*) { launch_moe_route(s, dl, p, di, ids_stride, dw); });
}

void CudaBackend::matmul_id(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) {
    const char* op = "matmul_id";
    require(matmul_supported(w.type), op, "unsupported weight type in W " + shape_of(w));
    require_ids(ids, op);
    require(n_expert > 0 && w.ne1 % n_expert == 0, op,
            "W " + shape_of(w) + " does not stack n_expert = " + std::to_string(n_expert) + " matrices");
    const int64_t n_out = w.ne1 / n_expert, n_used = ids.ne0, n = ids.ne1, total = n_used * n;
    require(x.type == TypeId::F32 && y.type == TypeId::F32 && x.ne0 == w.ne0 && (x.ne1 == n || x.ne1 == total) &&
                y.ne0 == n_out && y.ne1 == total,
            op,
            "expected W [k, n_expert * n_out], ids [n_used, n], x [k, n] or [k, n_used * n] f32, y [n_out, n_used * n] "
            "f32; got W " + shape_of(w) + ", ids " + shape_of(ids) + ", x " + shape_of(x) + ", y " + shape_of(y));
    require_aligned(w, op, "W");
    require_f32(x, op, "x");
    require_f32(y, op, "y");
    const DevTensor dw = dev(w, op, "W"), dx = dev(x, op, "x"), dy = dev(y, op, "y");
    if (w.ne0 == 0 || n_out == 0 || total == 0) return;
    const int32_t* di = index(flat_ids(ids), total, op, "ids");
    const size_t scratch_bytes = matmul_id_scratch_bytes(w.type, w.ne0, x.ne1);
    launch(op, Key(13).add(dw).add(n_expert).add(dx).add(di).add(n_used).add(dy).words(), scratch_bytes,
           [=](cudaStream_t s, void* scratch) { launch_matmul_id(s, dw, n_expert, dx, di, n_used, dy, scratch); });
}

void CudaBackend::add_id(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& y) {
    const char* op = "add_id";
    require_f32(a, op, "a");
    require_f32(b, op, "b");
    require_f32(y, op, "y");
    require_ids(ids, op);
    const int64_t rows = ids.ne0 * ids.ne1;
    require(a.ne0 == b.ne0 && a.ne0 == y.ne0 && a.ne1 == rows && y.ne1 == rows, op,
            "expected a, y [ne0, n_used * n], b [ne0, n_expert], ids [n_used, n]; got a " + shape_of(a) + ", b " +
                shape_of(b) + ", ids " + shape_of(ids) + ", y " + shape_of(y));
    const DevTensor da = dev(a, op, "a"), db = dev(b, op, "b"), dy = dev(y, op, "y");
    if (rows == 0 || a.ne0 == 0) return;
    const int32_t* di = index(flat_ids(ids), rows, op, "ids");
    launch(op, Key(14).add(da).add(db).add(di).add(dy).words(), 0,
           [=](cudaStream_t s, void*) { launch_add_id(s, da, db, di, dy); });
}

void CudaBackend::moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) {
    const char* op = "moe_combine";
    require_f32(y, op, "y");
    require_f32(weights, op, "weights");
    require_f32(out, op, "out");
    const int64_t n_used = weights.ne0, n = weights.ne1;
    require(n_used >= 1 && y.ne0 == out.ne0 && y.ne1 == n_used * n && out.ne1 == n, op,
            "expected y [ne0, n_used * n], weights [n_used, n], out [ne0, n]; got y " + shape_of(y) + ", weights " +
                shape_of(weights) + ", out " + shape_of(out));
    const DevTensor dy = dev(y, op, "y"), dw = dev(weights, op, "weights"), dout = dev(out, op, "out");
    if (n == 0 || y.ne0 == 0) return;
    launch(op, Key(15).add(dy).add(dw).add(dout).words(), 0,
           [=](cudaStream_t s, void*) { launch_moe_combine(s, dy, dw, dout); });
}

void CudaBackend::swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, const Tensor& y) {
    const char* op = "swiglu_oai";
    require_f32(gate, op, "gate");
    require_f32(up, op, "up");
    require_f32(y, op, "y");
    require(gate.ne0 == up.ne0 && gate.ne0 == y.ne0 && gate.ne1 == up.ne1 && gate.ne1 == y.ne1, op,
            "shapes do not match: gate " + shape_of(gate) + ", up " + shape_of(up) + ", y " + shape_of(y));
    const DevTensor dg = dev(gate, op, "gate"), du = dev(up, op, "up"), dy = dev(y, op, "y");
    if (gate.n_elements() == 0) return;
    launch(op, Key(16).add(dg).add(du).add(alpha).add(limit).add(dy).words(), 0,
           [=](cudaStream_t s, void*) { launch_swiglu_oai(s, dg, du, alpha, limit, dy); });
}

}  // namespace deskside::backends::cuda
