// CPU ops that read or write quantized storage: get_rows, matmul, copy, set_rows.
//
// matmul computes every output element as one vec_dot of a weight row with an activation row
// quantized to the weights' vec_dot_type, exactly as llama.cpp's CPU backend does, so quantized
// models give llama.cpp's numbers. The reduction order inside an element depends only on the
// row length, never on the batch size or the thread count (DESIGN.md key decision 5).
#include <cassert>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dot_kernels.h"
#include "quant/float16.h"
#include "quant/quant.h"

namespace deskside::backends::cpu {

namespace {

const quant::QuantTraits& traits_of(quant::TypeId type, const char* op) {
    const quant::QuantTraits* t = quant::quant_traits(type);
    if (!t) throw std::invalid_argument(std::string("cpu ") + op + ": unsupported tensor type " +
                                        std::string(quant::type_info(type).name));
    return *t;
}

// Output rows computed by one matmul task: enough to amortize the dispatch, few enough that a
// block of weights stays in cache while it is dotted with every activation row.
constexpr int64_t kMatmulRowsPerTask = 16;

// Q8_0 activations as llama.cpp's x86 CPU backend quantizes them (its SIMD quantize_row_q8_0):
// the inverse scale is 127 / amax and values round half to even. The reference quantizer
// (1 / (amax / 127), half away from zero) differs on a few values per row, which is enough to
// move the logits of a quantized model by more than their comparison tolerance.
void quantize_q8_0_like_llama_cpp(const float* x, void* dst, int64_t n) {
    struct Block {
        uint16_t d;
        int8_t qs[32];
    };
    auto* y = static_cast<Block*>(dst);
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
        y[b].d = quant::fp32_to_fp16(amax / 127.f);
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        for (int j = 0; j < 32; ++j) y[b].qs[j] = static_cast<int8_t>(std::nearbyint(v[j] * id));
    }
}

}  // namespace

void CpuBackend::get_rows(const Tensor& table, std::span<const int32_t> ids, const Tensor& dst) {
    assert(dst.type == quant::TypeId::F32 && dst.ne0 == table.ne0 && dst.ne1 == static_cast<int64_t>(ids.size()));
    const quant::QuantTraits& t = traits_of(table.type, "get_rows");
    for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= table.ne1)
            throw std::out_of_range("cpu get_rows: row id " + std::to_string(ids[i]) + " outside [0, " +
                                    std::to_string(table.ne1) + ")");
    }
    for_rows(static_cast<int64_t>(ids.size()), table.ne0, [&](int64_t i) {
        t.to_float(host_row(table, ids[i]), host_f32_row(dst, i), table.ne0);
    });
}

void CpuBackend::matmul(const Tensor& w, const Tensor& x, const Tensor& y) {
    assert(x.type == quant::TypeId::F32 && y.type == quant::TypeId::F32);
    assert(x.ne0 == w.ne0 && y.ne0 == w.ne1 && y.ne1 == x.ne1);
    const quant::QuantTraits& wt = traits_of(w.type, "matmul");
    const int64_t k = w.ne0, n_out = w.ne1, m = x.ne1;

    // Activations in the weights' dot type, one row per token.
    const uint8_t* act = host_row(x);
    size_t act_stride = x.row_stride;
    if (wt.vec_dot_type != quant::TypeId::F32) {
        const quant::QuantTraits& at = traits_of(wt.vec_dot_type, "matmul (activations)");
        act_stride = quant::row_bytes(wt.vec_dot_type, k);
        if (activations_.size() < act_stride * m) activations_.resize(act_stride * m);
        uint8_t* base = activations_.data();
        const quant::FromFloatFn quantize = wt.vec_dot_type == quant::TypeId::Q8_0 ? quantize_q8_0_like_llama_cpp : at.from_float;
        for_rows(m, k, [&](int64_t j) { quantize(host_f32_row(x, j), base + j * act_stride, k); });
        act = base;
    }

    const quant::VecDotFn dot = best_vec_dot(w.type);
    // Items are blocks of kMatmulRowsPerTask output rows, each dotted with every activation row.
    const int64_t n_blocks = (n_out + kMatmulRowsPerTask - 1) / kMatmulRowsPerTask;
    for_each(n_blocks, kMatmulRowsPerTask * k * m, [&](int64_t block, int) {
        const int64_t r0 = block * kMatmulRowsPerTask;
        const int64_t r1 = std::min(n_out, r0 + kMatmulRowsPerTask);
        for (int64_t j = 0; j < m; ++j) {
            const uint8_t* a = act + j * act_stride;
            float* out = host_f32_row(y, j);
            for (int64_t r = r0; r < r1; ++r) out[r] = dot(k, host_row(w, r), a);
        }
    });
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
    assert(src.ne0 == dst.ne0 && src.ne1 == dst.ne1);
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

void CpuBackend::set_rows(const Tensor& src, const Tensor& dst, std::span<const int32_t> rows) {
    assert(src.type == quant::TypeId::F32 && src.ne0 == dst.ne0 && src.ne1 == static_cast<int64_t>(rows.size()));
    const quant::QuantTraits& t = traits_of(dst.type, "set_rows");
    if (!t.from_float) throw std::invalid_argument("cpu set_rows: no quantizer for the destination type");
    for (int32_t r : rows) {
        if (r < 0 || r >= dst.ne1) throw std::out_of_range("cpu set_rows: row " + std::to_string(r) + " out of range");
    }
    for_rows(src.ne1, src.ne0, [&](int64_t i) { t.from_float(host_f32_row(src, i), host_row(dst, rows[i]), src.ne0); });
}

}  // namespace deskside::backends::cpu
