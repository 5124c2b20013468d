// CPU mixture-of-experts ops: the router (moe_route), the expert matmul (matmul_id), per-expert biases
// (add_id), the weighted sum of the experts' outputs (moe_combine) and gpt-oss's clamped SwiGLU (swiglu_oai).
//
// Each follows the ggml op llama.cpp's build_moe_ffn uses in its place, in the same float operations, so that
// a MoE model's logits match llama.cpp's: soft_max (max subtracted, expf, the sum in double, then every value
// times 1 / sum rounded to float), top-k by value as argsort (ties: the lower expert first, which ggml leaves
// open), the weights gathered (get_rows) and normalised by their sum in double (sum_rows), clamped to 2^-14
// (llama.cpp's guard against a zero sum), as one float division each (div); mul_mat_id; add_id; mul then an
// add chain; swiglu_oai. The default build compiles this file without FMA, so no product here is fused into
// the sum that follows it (as ggml's separate ops cannot be).
//
// matmul_id sorts the output rows by expert (a counting sort: stable, so each expert's rows stay in order),
// gathers their activations in that order while quantizing them, runs matmul's tasks (run_matmul_task) over
// each expert's weight rows and its columns, and scatters the outputs back. A row is summed exactly as matmul
// sums it with that expert's matrix, whatever else the batch holds (batch invariance, DESIGN.md key decision
// 5).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/repack.h"
#include "quant/quant.h"

namespace deskside::backends::cpu {

namespace {

std::string shape_of(const Tensor& t) {
    return "[" + std::to_string(t.ne0) + ", " + std::to_string(t.ne1) + "] " +
           std::string(quant::type_info(t.type).name);
}

void require(bool ok, const char* op, const std::string& what) {
    if (!ok) throw std::invalid_argument(std::string("cpu ") + op + ": " + what);
}

void require_f32(const Tensor& t, const char* op, const char* name) {
    require(!t.empty() && t.type == quant::TypeId::F32, op,
            std::string(name) + " must be F32, got " + (t.empty() ? std::string("none") : shape_of(t)));
}

// The expert ids of an ids tensor I32 [n_used, n]: word s of row t, read row by row.
void require_ids(const Tensor& ids, const char* op) {
    require(!ids.empty() && ids.type == quant::TypeId::I32, op,
            "ids must be an I32 tensor [n_used, n], got " + (ids.empty() ? std::string("none") : shape_of(ids)));
}
const int32_t* id_row(const Tensor& ids, int64_t t) { return reinterpret_cast<const int32_t*>(host_row(ids, t)); }

// ggml's soft_max of v[0, n) in place: max subtracted, expf, summed in double, times 1 / sum.
void softmax_in_place(float* v, int64_t n) {
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) max = std::max(max, v[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        v[i] = std::exp(v[i] - max);
        sum += static_cast<double>(v[i]);
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) v[i] *= inv;
}

// The k largest of v[0, n) into order[0, k), largest first, ties to the lower index.
void top_k(const float* v, int64_t n, int64_t k, int32_t* order, int32_t* all) {
    for (int64_t i = 0; i < n; ++i) all[i] = static_cast<int32_t>(i);
    std::partial_sort(all, all + k, all + n,
                      [v](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
    std::copy(all, all + k, order);
}

}  // namespace

void CpuBackend::moe_route(const Tensor& logits, const MoeRouteParams& p, const Tensor& ids, const Tensor& weights) {
    const char* op = "moe_route";
    require_f32(logits, op, "logits");
    require_f32(weights, op, "weights");
    require_ids(ids, op);
    const int64_t n = logits.ne1, n_expert = p.n_expert, n_used = p.n_used;
    require(n_expert > 0 && logits.ne0 == n_expert, op,
            "logits " + shape_of(logits) + " must have n_expert = " + std::to_string(n_expert) + " rows' width");
    require(n_used >= 1 && n_used <= n_expert, op,
            "n_used " + std::to_string(n_used) + " must be in [1, n_expert = " + std::to_string(n_expert) + "]");
    require(ids.ne0 == n_used && ids.ne1 == n && weights.ne0 == n_used && weights.ne1 == n, op,
            "ids " + shape_of(ids) + " and weights " + shape_of(weights) + " must be [n_used, n] = [" +
                std::to_string(n_used) + ", " + std::to_string(n) + "]");
    // Per thread: the probabilities (or logits) of one token and an index permutation.
    const size_t per_thread = static_cast<size_t>(n_expert);
    if (router_probs_.size() < per_thread * pool_.size()) router_probs_.resize(per_thread * pool_.size());
    if (router_perm_.size() < per_thread * pool_.size()) router_perm_.resize(per_thread * pool_.size());
    for_each(n, 8 * n_expert, [&](int64_t t, int thread) {
        float* probs = router_probs_.data() + thread * per_thread;
        int32_t* perm = router_perm_.data() + thread * per_thread;
        auto* chosen = reinterpret_cast<int32_t*>(host_row(ids, t));
        float* w = host_f32_row(weights, t);
        std::memcpy(probs, host_f32_row(logits, t), static_cast<size_t>(n_expert) * sizeof(float));
        if (p.gating == MoeGating::SoftmaxThenTopK) softmax_in_place(probs, n_expert);
        top_k(probs, n_expert, n_used, chosen, perm);
        for (int64_t s = 0; s < n_used; ++s) w[s] = probs[chosen[s]];
        if (p.gating == MoeGating::TopKThenSoftmax) {
            softmax_in_place(w, n_used);
        } else if (p.normalize) {
            double sum = 0.0;
            for (int64_t s = 0; s < n_used; ++s) sum += static_cast<double>(w[s]);
            const float clamped = std::max(static_cast<float>(sum), 6.103515625e-5f);  // 2^-14
            for (int64_t s = 0; s < n_used; ++s) w[s] = w[s] / clamped;
        }
    });
}

void CpuBackend::matmul_id(const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) {
    const char* op = "matmul_id";
    require_f32(x, op, "x");
    require_f32(y, op, "y");
    require_ids(ids, op);
    require(n_expert > 0 && w.ne1 % n_expert == 0, op,
            "W " + shape_of(w) + " does not stack n_expert = " + std::to_string(n_expert) + " matrices");
    const int64_t k = w.ne0, n_out = w.ne1 / n_expert, n_used = ids.ne0, n = ids.ne1, total = n_used * n;
    const bool per_slot = x.ne1 == total;
    require(x.ne0 == k && (x.ne1 == n || per_slot) && y.ne0 == n_out && y.ne1 == total, op,
            "expected W [k, n_expert * n_out], ids [n_used, n], x [k, n] or [k, "
            "n_used * n], y [n_out, n_used * n]; "
            "got W " +
                shape_of(w) + " (n_expert " + std::to_string(n_expert) + "), ids " + shape_of(ids) + ", x " +
                shape_of(x) + ", y " + shape_of(y));
    if (total == 0 || n_out == 0) return;

    // Output rows grouped by expert: moe_order_ holds [0, total) the output rows, [total, 2 total) the x rows
    // they read, then the n_expert + 1 column starts, the n_expert + 1 task starts and n_expert fill
    // positions.
    const int64_t row_blocks = (n_out + kMatmulRowsPerTask - 1) / kMatmulRowsPerTask;
    moe_order_.assign(static_cast<size_t>(2 * total + 3 * n_expert + 2), 0);
    int32_t* out_rows = moe_order_.data();
    int32_t* x_rows = out_rows + total;
    int32_t* col_start = x_rows + total;
    int32_t* task_start = col_start + n_expert + 1;
    int32_t* fill = task_start + n_expert + 1;
    for (int64_t t = 0; t < n; ++t) {
        const int32_t* row = id_row(ids, t);
        for (int64_t s = 0; s < n_used; ++s) {
            if (row[s] < 0 || row[s] >= n_expert)
                throw std::out_of_range("cpu matmul_id: expert id " + std::to_string(row[s]) + " outside [0, " +
                                        std::to_string(n_expert) + ")");
            ++col_start[row[s] + 1];
        }
    }
    int64_t n_active = 0;
    for (int64_t e = 0; e < n_expert; ++e) {
        const int32_t count = col_start[e + 1];
        n_active += count > 0;
        task_start[e + 1] =
            static_cast<int32_t>(task_start[e] + row_blocks * ((count + kMatmulColsPerTask - 1) / kMatmulColsPerTask));
        col_start[e + 1] += col_start[e];
    }
    std::copy(col_start, col_start + n_expert, fill);
    for (int64_t t = 0; t < n; ++t) {
        const int32_t* row = id_row(ids, t);
        for (int64_t s = 0; s < n_used; ++s) {
            const int32_t at = fill[row[s]]++;
            out_rows[at] = static_cast<int32_t>(t * n_used + s);
            x_rows[at] = static_cast<int32_t>(per_slot ? t * n_used + s : t);
        }
    }

    const MatmulOperands base = matmul_operands(w, x, {x_rows, static_cast<size_t>(total)}, total, op);
    const GemmFn gemm = best_gemm(w.type);
    // Expert e's rows start at row e * n_out: x8 groups of its own when n_out is a multiple of 8.
    const bool straddling = base.n_interleaved > 0 && n_out % kRepackRows != 0;
    const WeightLayout layout = owned_by<HostBuffer>(*this, *w.buffer, op).layout();
    const size_t row_bytes = w.row_bytes();
    if (straddling && row_scratch_.size() < row_bytes * pool_.size()) row_scratch_.resize(row_bytes * pool_.size());
    if (moe_outputs_.size() < static_cast<size_t>(total * n_out))
        moe_outputs_.resize(static_cast<size_t>(total * n_out));
    const int64_t cols_per_task = std::clamp<int64_t>(total / std::max<int64_t>(1, n_active), 1, kMatmulColsPerTask);
    for_each(task_start[n_expert], kMatmulRowsPerTask * cols_per_task * k, [&](int64_t task, int thread) {
        const int64_t e =
            std::upper_bound(task_start, task_start + n_expert + 1, static_cast<int32_t>(task)) - task_start - 1;
        const int64_t local = task - task_start[e], first = col_start[e], count = col_start[e + 1] - first;
        const int64_t r0 = (local % row_blocks) * kMatmulRowsPerTask, r1 = std::min(n_out, r0 + kMatmulRowsPerTask);
        const int64_t c0 = (local / row_blocks) * kMatmulColsPerTask, nc = std::min(count - c0, kMatmulColsPerTask);
        float* out = moe_outputs_.data() + first * n_out;
        const uint8_t* act = base.act + first * base.act_stride;
        if (straddling) {
            // Groups straddle experts: each interleaved row back in the GGUF layout, one dot each.
            uint8_t* plain = row_scratch_.data() + thread * row_bytes;
            for (int64_t r = r0; r < r1; ++r) {
                const int64_t g = e * n_out + r;
                const uint8_t* wr = base.weights + g * base.w_stride;
                if (g < base.n_interleaved) {
                    unpack_row(layout, base.weights, k, w.ne1, g, plain);
                    wr = plain;
                }
                for (int64_t j = c0; j < c0 + nc; ++j) out[j * n_out + r] = base.dot(k, wr, act + j * base.act_stride);
            }
            return;
        }
        MatmulOperands o = base;
        o.weights = base.weights + static_cast<size_t>(e * n_out) * base.w_stride;
        o.n_interleaved = base.n_interleaved > 0 ? n_out : 0;
        o.prefetch_rows = n_out;
        o.gemm = count > 1 ? gemm : nullptr;
        o.act = act;
        o.sums = base.sums ? base.sums + first * base.n_blocks : nullptr;
        o.out = out;
        o.out_stride = static_cast<size_t>(n_out);
        run_matmul_task(o, r0, r1, c0, nc, false);
    });
    for_rows(total, n_out, [&](int64_t j) {
        std::memcpy(host_f32_row(y, out_rows[j]), moe_outputs_.data() + j * n_out,
                    static_cast<size_t>(n_out) * sizeof(float));
    });
}

void CpuBackend::add_id(const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& y) {
    const char* op = "add_id";
    require_f32(a, op, "a");
    require_f32(b, op, "b");
    require_f32(y, op, "y");
    require_ids(ids, op);
    const int64_t n_used = ids.ne0, total = ids.ne0 * ids.ne1;
    require(a.ne0 == b.ne0 && a.ne0 == y.ne0 && a.ne1 == total && y.ne1 == total, op,
            "expected a, y [ne0, n_used * n], b [ne0, n_expert], ids [n_used, "
            "n]; got a " +
                shape_of(a) + ", b " + shape_of(b) + ", ids " + shape_of(ids) + ", y " + shape_of(y));
    for (int64_t t = 0; t < ids.ne1; ++t)
        for (int64_t s = 0; s < n_used; ++s)
            if (id_row(ids, t)[s] < 0 || id_row(ids, t)[s] >= b.ne1)
                throw std::out_of_range("cpu add_id: expert id " + std::to_string(id_row(ids, t)[s]) + " outside [0, " +
                                        std::to_string(b.ne1) + ")");
    for_rows(total, a.ne0, [&](int64_t r) {
        const float* pa = host_f32_row(a, r);
        const float* pb = host_f32_row(b, id_row(ids, r / n_used)[r % n_used]);
        float* py = host_f32_row(y, r);
        for (int64_t i = 0; i < a.ne0; ++i) py[i] = pa[i] + pb[i];
    });
}

void CpuBackend::moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) {
    const char* op = "moe_combine";
    require_f32(y, op, "y");
    require_f32(weights, op, "weights");
    require_f32(out, op, "out");
    const int64_t n_used = weights.ne0, n = weights.ne1;
    require(n_used >= 1 && y.ne0 == out.ne0 && y.ne1 == n_used * n && out.ne1 == n, op,
            "expected y [ne0, n_used * n], weights [n_used, n], out [ne0, n]; "
            "got y " +
                shape_of(y) + ", weights " + shape_of(weights) + ", out " + shape_of(out));
    for_rows(n, y.ne0 * n_used, [&](int64_t t) {
        const float* w = host_f32_row(weights, t);
        float* o = host_f32_row(out, t);
        const float* y0 = host_f32_row(y, t * n_used);
        for (int64_t i = 0; i < y.ne0; ++i) o[i] = y0[i] * w[0];
        for (int64_t s = 1; s < n_used; ++s) {
            const float* ys = host_f32_row(y, t * n_used + s);
            for (int64_t i = 0; i < y.ne0; ++i) {
                const float product = ys[i] * w[s];
                o[i] = o[i] + product;
            }
        }
    });
}

void CpuBackend::swiglu_oai(const Tensor& gate, const Tensor& up, float alpha, float limit, const Tensor& y) {
    const char* op = "swiglu_oai";
    require_f32(gate, op, "gate");
    require_f32(up, op, "up");
    require_f32(y, op, "y");
    require(gate.ne0 == up.ne0 && gate.ne0 == y.ne0 && gate.ne1 == up.ne1 && gate.ne1 == y.ne1, op,
            "shapes do not match: gate " + shape_of(gate) + ", up " + shape_of(up) + ", y " + shape_of(y));
    for_rows(gate.ne1, gate.ne0, [&](int64_t r) {
        const float* g = host_f32_row(gate, r);
        const float* u = host_f32_row(up, r);
        float* out = host_f32_row(y, r);
        for (int64_t i = 0; i < gate.ne0; ++i) {
            const float xg = std::min(g[i], limit);
            const float xu = std::clamp(u[i], -limit, limit);
            const float glu = xg / (1.0f + std::exp(alpha * (-xg)));
            out[i] = glu * (xu + 1.0f);
        }
    });
}

}  // namespace deskside::backends::cpu
