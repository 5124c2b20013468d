// CPU ops that read or write quantized storage: get_rows, matmul, copy, set_rows; and the matmul
// machinery (matmul_operands, run_matmul_task) that matmul_id (ops_moe.cpp) shares.
//
// matmul computes every output element as one vec_dot of a weight row with an activation row
// quantized to the weights' vec_dot_type (with llama.cpp's x86 activation rounding, see
// quant/activation_quant.h), so quantized models give llama.cpp's numbers. Batches go through a
// tiled gemm kernel (gemm_kernels.h) whose every output is summed in the single-row kernel's
// order: the reduction order inside an element depends only on the row length, never on the
// batch size or the thread count (DESIGN.md key decision 5).
//
// Q4_0, Q8_0, Q4_K and Q6_K matrices loaded through map_weight_matrix are row-interleaved
// (repack.h): their groups of 8 rows go through the x8 kernel for every batch size, decode
// included (its 1-column tile), and get_rows gathers a row back into the GGUF layout before
// dequantizing it.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/cpu/convert_f16.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dot_kernels.h"
#include "backends/cpu/gemm_kernels.h"
#include "backends/cpu/repack.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace deskside::backends::cpu {

namespace {

// Requests the cache lines of [p, p + n) ahead of use. Decoding streams every weight row once
// from DRAM, and one row of vec_dot work (1-3 KB) is too short for the hardware prefetcher to
// ramp up on its own: keeping the next two rows in flight while a row is dotted took about 10 %
// less thread CPU time per matvec (docs/PERFORMANCE.md, session 3). Prefetches never fault, and
// a line already cached costs one instruction.
constexpr int64_t kPrefetchRows = 2;

void prefetch_lines(const uint8_t* p, size_t n) {
    constexpr size_t kLine = 64;
    for (size_t off = 0; off < n; off += kLine) __builtin_prefetch(p + off, 0, 3);
}

}  // namespace

const quant::QuantTraits& traits_of(quant::TypeId type, const char* op) {
    const quant::QuantTraits* t = quant::quant_traits(type);
    if (!t) throw std::invalid_argument(std::string("cpu ") + op + ": unsupported tensor type " +
                                        std::string(quant::type_info(type).name));
    return *t;
}

void check_whole_matrix(const Tensor& t, const char* op) {
    if (t.offset != 0 || t.row_stride != t.row_bytes() || static_cast<size_t>(t.ne1) * t.row_bytes() != t.buffer->size())
        throw std::invalid_argument(std::string("cpu ") + op + ": a row-interleaved weight matrix can only be used whole");
}

void CpuBackend::get_rows(const Tensor& table, const Tensor& id_tensor, const Tensor& dst) {
    const std::span<const int32_t> ids = host_i32(id_tensor, dst.ne1, "get_rows");
    assert(dst.type == quant::TypeId::F32 && dst.ne0 == table.ne0);
    const quant::QuantTraits& t = traits_of(table.type, "get_rows");
    for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= table.ne1)
            throw std::out_of_range("cpu get_rows: row id " + std::to_string(ids[i]) + " outside [0, " +
                                    std::to_string(table.ne1) + ")");
    }
    const WeightLayout layout = owned_by<HostBuffer>(*this, *table.buffer, "get_rows").layout();
    if (layout == WeightLayout::Plain) {
        for_rows(static_cast<int64_t>(ids.size()), table.ne0, [&](int64_t i) {
            t.to_float(host_row(table, ids[i]), host_f32_row(dst, i), table.ne0);
        });
        return;
    }
    // An interleaved matrix (a tied embedding / output head): gather the row into the GGUF
    // layout first, then the type's own dequantizer gives the same floats as before the repack.
    check_whole_matrix(table, "get_rows");
    const size_t row_bytes = table.row_bytes();
    if (row_scratch_.size() < row_bytes * pool_.size()) row_scratch_.resize(row_bytes * pool_.size());
    for_each(static_cast<int64_t>(ids.size()), table.ne0, [&](int64_t i, int thread) {
        uint8_t* plain = row_scratch_.data() + thread * row_bytes;
        unpack_row(layout, host_row(table), table.ne0, table.ne1, ids[i], plain);
        t.to_float(plain, host_f32_row(dst, i), table.ne0);
    });
}

void CpuBackend::matmul(const Tensor& w, const Tensor& x, const Tensor& y) {
    assert(x.type == quant::TypeId::F32 && y.type == quant::TypeId::F32);
    assert(x.ne0 == w.ne0 && y.ne0 == w.ne1 && y.ne1 == x.ne1);
    const int64_t k = w.ne0, n_out = w.ne1, m = x.ne1;
    MatmulOperands o = matmul_operands(w, x, {}, m, "matmul");
    o.prefetch_rows = n_out;
    o.gemm = m > 1 ? best_gemm(w.type) : nullptr;
    o.out = host_f32_row(y);
    o.out_stride = y.row_stride / sizeof(float);
    // Tasks in (column block, row block) order: consecutive tasks share the activation block.
    const int64_t row_blocks = (n_out + kMatmulRowsPerTask - 1) / kMatmulRowsPerTask;
    const int64_t col_blocks = (m + kMatmulColsPerTask - 1) / kMatmulColsPerTask;
    const int64_t cols_per_block = std::min(m, kMatmulColsPerTask);
    // One column block (decode, small batches): each thread streams its own contiguous rows.
    const Distribution distribution = col_blocks == 1 ? Distribution::Contiguous : Distribution::Interleaved;
    for_each(row_blocks * col_blocks, kMatmulRowsPerTask * cols_per_block * k, distribution, [&](int64_t task, int) {
        const int64_t r0 = (task % row_blocks) * kMatmulRowsPerTask;
        const int64_t c0 = (task / row_blocks) * kMatmulColsPerTask;
        run_matmul_task(o, r0, std::min(n_out, r0 + kMatmulRowsPerTask), c0, std::min(m - c0, kMatmulColsPerTask),
                        distribution == Distribution::Contiguous);
    });
}

MatmulOperands CpuBackend::matmul_operands(const Tensor& w, const Tensor& x, std::span<const int32_t> x_rows, int64_t m,
                                           const char* op) {
    const quant::QuantTraits& wt = traits_of(w.type, op);
    const int64_t k = w.ne0;
    const auto x_row = [&](int64_t j) { return x_rows.empty() ? j : int64_t{x_rows[j]}; };
    MatmulOperands o;
    o.weights = host_row(w);
    o.w_stride = w.row_stride;
    o.k = k;
    o.dot = best_vec_dot(w.type);

    // Activations in the weights' dot type, one row per column, quantized once per call. F32
    // weights read x as it is, or its rows gathered in order.
    o.act = host_row(x);
    o.act_stride = x.row_stride;
    if (wt.vec_dot_type != quant::TypeId::F32 || !x_rows.empty()) {
        const bool quantized = wt.vec_dot_type != quant::TypeId::F32;
        o.act_stride = quant::row_bytes(wt.vec_dot_type, k);
        if (activations_.size() < o.act_stride * m) activations_.resize(o.act_stride * m);
        uint8_t* base = activations_.data();
        const quant::FromFloatFn quantize = quantized ? best_activation_quantizer(wt.vec_dot_type) : nullptr;
        if (quantized && !quantize)
            throw std::invalid_argument(std::string("cpu ") + op + ": no quantizer for the activation type");
        for_rows(m, k, [&](int64_t j) {
            if (quantized) quantize(host_f32_row(x, x_row(j)), base + j * o.act_stride, k);
            else std::memcpy(base + j * o.act_stride, host_row(x, x_row(j)), o.act_stride);
        });
        o.act = base;
    }

    // An x8 (row-interleaved) matrix sends its groups of 8 rows, [0, n_il), through the x8 kernel
    // for every m, decode included; its ne1 % 8 tail rows, like every row of a plain matrix, go
    // through the GGUF-layout kernels, tiled or not by m alone. Both are batch-invariant.
    const WeightLayout layout = owned_by<HostBuffer>(*this, *w.buffer, op).layout();
    o.n_blocks = k / quant::kQK;
    if (layout != WeightLayout::Plain) {
        check_whole_matrix(w, op);
        o.n_interleaved = interleaved_rows(w.ne1);
        o.x8_kernel = repacked_gemm(layout);
        // Q4_0x8 folds the weights' +8 level offset into one subtraction per block, which needs
        // the integer sum of every activation block.
        if (needs_block_sums(layout)) {
            const int64_t nb = o.n_blocks;
            if (activation_sums_.size() < static_cast<size_t>(nb * m)) activation_sums_.resize(nb * m);
            for_rows(m, k, [&](int64_t j) {
                const auto* blocks = reinterpret_cast<const quant::BlockQ8_0*>(o.act + j * o.act_stride);
                for (int64_t b = 0; b < nb; ++b) {
                    int sum = 0;
                    for (int8_t v : blocks[b].qs) sum += v;
                    activation_sums_[j * nb + b] = static_cast<int16_t>(sum);
                }
            });
            o.sums = activation_sums_.data();
        }
    }
    return o;
}

void run_matmul_task(const MatmulOperands& o, int64_t r0, int64_t r1, int64_t c0, int64_t nc, bool streaming) {
    const int64_t split = std::clamp(o.n_interleaved, r0, r1);  // rows [r0, split) are interleaved
    if (split > r0) {
        // A thread streaming its share prefetches on into its next task's rows.
        const int64_t groups = (split - r0) / kRepackRows;
        const int64_t prefetch = streaming ? (o.n_interleaved - r0) / kRepackRows : groups;
        o.x8_kernel(o.k, o.weights + r0 * o.w_stride, groups, prefetch, o.act + c0 * o.act_stride, o.act_stride,
                    o.sums ? o.sums + c0 * o.n_blocks : nullptr, static_cast<size_t>(o.n_blocks), nc,
                    o.out + c0 * o.out_stride + r0, o.out_stride);
    }
    if (split == r1) return;
    if (o.gemm) {
        o.gemm(o.k, o.weights + split * o.w_stride, o.w_stride, r1 - split, o.act + c0 * o.act_stride, o.act_stride,
               nc, o.out + c0 * o.out_stride + split, o.out_stride);
        return;
    }
    for (int64_t j = c0; j < c0 + nc; ++j) {
        const uint8_t* a = o.act + j * o.act_stride;
        float* row = o.out + j * o.out_stride;
        for (int64_t r = split; r < r1; ++r) {
            // The first activation row brings the task's weight rows in; the others find
            // them cached. At the task's first row, rows r + 1 .. r + kPrefetchRows start.
            if (j == c0) {
                const int64_t first = r == split ? r + 1 : r + kPrefetchRows;
                for (int64_t p = first; p <= r + kPrefetchRows && p < o.prefetch_rows; ++p)
                    prefetch_lines(o.weights + p * o.w_stride, o.w_stride);
            }
            row[r] = o.dot(o.k, o.weights + r * o.w_stride, a);
        }
    }
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
    assert(src.ne0 == dst.ne0 && src.ne1 == dst.ne1);
    // Weights are read-only, and a row-interleaved one has no GGUF rows to copy (get_rows reads it).
    if (owned_by<HostBuffer>(*this, *src.buffer, "copy").layout() != WeightLayout::Plain)
        throw std::invalid_argument("cpu copy: the source is a row-interleaved weight matrix; read it with get_rows");
    if (src.type == dst.type) {
        const size_t bytes = src.row_bytes();
        for_rows(src.ne1, src.ne0, [&](int64_t r) { std::memmove(host_row(dst, r), host_row(src, r), bytes); });
    } else if (src.type == quant::TypeId::F32) {
        const quant::QuantTraits& t = traits_of(dst.type, "copy");
        if (!t.from_float) throw std::invalid_argument("cpu copy: no quantizer for the destination type");
        for_rows(src.ne1, src.ne0, [&](int64_t r) { t.from_float(host_f32_row(src, r), host_row(dst, r), src.ne0); });
    } else if (dst.type == quant::TypeId::F32) {
        const quant::QuantTraits& t = traits_of(src.type, "copy");
        for_rows(src.ne1, src.ne0, [&](int64_t r) { t.to_float(host_row(src, r), host_f32_row(dst, r), src.ne0); });
    } else {
        throw std::invalid_argument("cpu copy: conversions go through F32");
    }
}

void CpuBackend::set_rows(const Tensor& src, const Tensor& dst, const Tensor& row_tensor) {
    const std::span<const int32_t> rows = host_i32(row_tensor, src.ne1, "set_rows");
    assert(src.type == quant::TypeId::F32 && src.ne0 == dst.ne0);
    const quant::QuantTraits& t = traits_of(dst.type, "set_rows");
    if (!t.from_float) throw std::invalid_argument("cpu set_rows: no quantizer for the destination type");
    for (int32_t r : rows) {
        if (r < 0 || r >= dst.ne1) throw std::out_of_range("cpu set_rows: row " + std::to_string(r) + " out of range");
    }
    // F16 (the default KV cache) goes through the F16C converter: the same bits, ~20x faster.
    const quant::FromFloatFn write = dst.type == quant::TypeId::F16 ? best_f16_converter() : t.from_float;
    for_rows(src.ne1, src.ne0, [&](int64_t i) { write(host_f32_row(src, i), host_row(dst, rows[i]), src.ne0); });
}

}  // namespace deskside::backends::cpu
