// Backend::matmul on Vulkan: splits y = W x into dispatches whose bindings fit the device's
// maxStorageBufferRange, and picks the kernel per weight type and the tile shape per dispatch.
//
// Kernels (matmul_variant): integer dot products on activations quantized like the CPU's for the
// quantized types, F32 activations and dequantized weights for F32, F16 and BF16. The quantized
// types' activations are quantized once per matmul (per range of columns that fits a binding) by
// shaders/matmul_act_quant.comp into the backend's scratch buffer, which every workgroup of the
// matmul then reads: a column is quantized once, not once per row tile.
//
// The tile shape only decides how much work one workgroup does; every shape computes an output
// with the same arithmetic in the same order (see shaders/matmul.comp), so a column's result does
// not depend on how many columns were multiplied with it, nor on how the work was split.
#include "backends/vulkan/vk_matmul.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "backends/vulkan/vk_backend.h"
#include "quant/quant.h"

namespace deskside::backends::vulkan {
namespace {

// Push constants of shaders/matmul.comp, matmul_q8.comp and matmul_q8k.comp, in their order.
struct MatmulParams {
    uint32_t k, n_rows, n_cols;
    uint32_t w_offset, w_stride;  // bytes
    uint32_t x_offset, x_stride;  // F32 elements, or words of the quantized activations
    uint32_t y_offset, y_stride;  // F32 elements
    uint32_t chain_rows;          // matmul_q8*.comp: rows [0, chain_rows) in the CPU's x8 order
};

// Push constants of the MATMUL_ID twins (matmul_id_*): MatmulParams, then the expert fields.
struct MatmulIdParams {
    MatmulParams base;
    uint32_t expert_stride;  // bytes between the bound experts' row 0
    uint32_t expert_first, n_experts;
    uint32_t ids_offset;  // word of column 0's expert id
    uint32_t x_div;       // columns per activation column
};

// Push constants of shaders/matmul_act_quant.comp, in its order.
struct ActQuantParams {
    uint32_t k, n_cols;
    uint32_t x_offset, x_stride;  // F32 elements
    uint32_t q_offset, q_stride;  // words
};

// Specialization constants 0 (output rows per workgroup, 32 threads each) and 1 (activation
// columns per workgroup) of shaders/matmul.comp.
struct TileShape {
    uint32_t rows, cols;
};
// Decode: one column, 4 rows x 32 lanes = 128 threads.
constexpr TileShape kMatvecTile{4, 1};
// Prompt: 8 rows x 4 columns, 256 threads; shared memory 4 x 32 x 33 floats of activations plus
// 8 x 4 x 32 lane sums = 21 KiB, under the 32 KiB every Vulkan 1.2 device offers.
constexpr TileShape kMatmulTile{8, 4};

std::string describe(const Tensor& t) {
    return "[" + std::to_string(t.ne0) + ", " + std::to_string(t.ne1) + "] " + std::string(quant::type_info(t.type).name);
}

uint32_t to_u32(uint64_t v, const char* what) {
    if (v > std::numeric_limits<uint32_t>::max())
        throw std::invalid_argument(std::string("vulkan matmul: ") + what + " of " + std::to_string(v) + " exceeds 32 bits");
    return static_cast<uint32_t>(v);
}

uint32_t ceil_div(int64_t a, uint32_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// The type the CPU quantizes activations to for W's type (traits' vec_dot_type); F32 for the
// float weights, whose activations matmul.comp reads as they are.
quant::TypeId activation_type(quant::TypeId type) {
    const quant::QuantTraits* traits = quant::quant_traits(type);
    return traits ? traits->vec_dot_type : quant::TypeId::F32;
}

// Words one quantized column of k activations takes in matmul_act_quant.comp's layout (9 words
// per 32-element Q8_0/Q8_1 block, 65 per 256-element Q8_K block), and that shader's workgroups
// for n columns; 0 words for F32 activations.
uint64_t quantized_column_words(quant::TypeId act, int64_t k) {
    if (act == quant::TypeId::Q8_0 || act == quant::TypeId::Q8_1) return static_cast<uint64_t>(k / 32) * 9;
    if (act == quant::TypeId::Q8_K) return static_cast<uint64_t>(k / 256) * 65;
    return 0;
}
uint64_t act_quant_groups(quant::TypeId act, int64_t k, int64_t n) {
    if (act == quant::TypeId::Q8_K) return static_cast<uint64_t>(k / 256) * n;  // a workgroup per block
    return (static_cast<uint64_t>(k / 32) * n + 31) / 32;                        // an invocation per block
}

// Q8_K with shaderFloat64: the CPU backend's FMA rounding of the levels (act_quant.glsl).
const char* act_quant_variant(quant::TypeId act, bool fp64) {
    if (act == quant::TypeId::Q8_K) return fp64 ? "matmul_act_q8_k_exact" : "matmul_act_q8_k";
    return act == quant::TypeId::Q8_1 ? "matmul_act_q8_1" : "matmul_act_q8_0";
}

// The shader variant for W's type on this device: the integer-dot kernels for the types whose
// activations the CPU quantizes to Q8_0/Q8_1 (matmul_q8.comp) or Q8_K (matmul_q8k.comp), with
// SPV_KHR_integer_dot_product where the device has it; matmul.comp for F32, F16 and BF16. Where
// the device has shaderFloat64, the _exact variant (the CPU's fused multiply-adds in double).
std::string matmul_variant(const VulkanBackend& be, quant::TypeId type, const char* suffix) {
    const quant::TypeId act = activation_type(type);
    const bool dot = be.caps().int8_dot;
    const std::string exact = be.caps().fp64 ? "_exact" : "";
    if (act == quant::TypeId::Q8_0 || act == quant::TypeId::Q8_1)
        return weight_shader(be, std::string(dot ? "matmul_q8dot_" : "matmul_q8_") + suffix, type) + exact;
    if (act == quant::TypeId::Q8_K)
        return weight_shader(be, std::string(dot ? "matmul_q8kdot_" : "matmul_q8k_") + suffix, type) + exact;
    return weight_shader(be, std::string("matmul_") + suffix, type) + exact;
}

// Rows of an n_out-row matrix of `type` that the CPU backend keeps row-interleaved
// (backends/cpu/repack.h, at its AVX2 level with DESKSIDE_CPU_REPACK unset): it sums each of
// them as one FMA chain over blocks instead of its vec_dot's 8 lanes, and matmul_q8*.comp follow
// it there to give its bits. Keep in step with repack.h's layouts (the mirror test,
// tests/engine/test_device_mirror.cpp, fails on any row summed the other way).
int64_t cpu_x8_rows(quant::TypeId type, int64_t n_out) {
    const bool x8 = type == quant::TypeId::Q4_0 || type == quant::TypeId::Q4_K;
    return x8 ? n_out / 8 * 8 : 0;
}

// Quantizes activation columns [first, first + n) of x into xq's columns 0 .. n - 1 (the
// backend's barrier tracking orders the matmul's reads after it).
void record_act_quant(VulkanBackend& be, quant::TypeId act, int64_t k, const Tensor& x, int64_t first, int64_t n,
                      const Tensor& xq, uint64_t q_words) {
    const Binding xb = be.bind_rows(x, first, n, Access::Read);
    const Binding qb = be.bind_rows(xq, 0, n, Access::Write);
    const ActQuantParams qp{to_u32(k, "k"), static_cast<uint32_t>(n), xb.skip_bytes / 4,
                            to_u32(x.row_stride / 4, "x's row stride"), qb.skip_bytes / 4,
                            to_u32(q_words, "quantized column words")};
    be.dispatch(be.pipeline(act_quant_variant(act, be.caps().fp64), 2, sizeof(ActQuantParams)), {xb, qb}, &qp,
                be.groups(act_quant_groups(act, k, n)));
}

}  // namespace

const char* vulkan_type_suffix(quant::TypeId type) {
    using quant::TypeId;
    switch (type) {
        case TypeId::F32: return "f32";
        case TypeId::F16: return "f16";
        case TypeId::BF16: return "bf16";
        case TypeId::Q8_0: return "q8_0";
        case TypeId::Q4_0: return "q4_0";
        case TypeId::Q4_1: return "q4_1";
        case TypeId::Q5_0: return "q5_0";
        case TypeId::Q5_1: return "q5_1";
        case TypeId::Q2_K: return "q2_k";
        case TypeId::Q3_K: return "q3_k";
        case TypeId::Q4_K: return "q4_k";
        case TypeId::Q5_K: return "q5_k";
        case TypeId::Q6_K: return "q6_k";
        case TypeId::IQ4_NL: return "iq4_nl";
        case TypeId::IQ4_XS: return "iq4_xs";
        case TypeId::IQ2_XXS: return "iq2_xxs";
        case TypeId::IQ2_XS: return "iq2_xs";
        case TypeId::IQ2_S: return "iq2_s";
        case TypeId::IQ3_XXS: return "iq3_xxs";
        case TypeId::IQ3_S: return "iq3_s";
        case TypeId::IQ1_S: return "iq1_s";
        case TypeId::IQ1_M: return "iq1_m";
        case TypeId::TQ1_0: return "tq1_0";
        case TypeId::TQ2_0: return "tq2_0";
        case TypeId::MXFP4: return "mxfp4";
        default: return nullptr;
    }
}

std::string weight_shader(const VulkanBackend& be, std::string base, quant::TypeId type) {
    if (be.caps().storage16 && type != quant::TypeId::F32) base += "_s16";
    return base;
}

void require_weight_alignment(const Tensor& w, const char* op) {
    // dequant.glsl reads 16-bit fields at even addresses (F32 as whole words; MXFP4, whose blocks
    // have odd sizes, byte by byte).
    const size_t align = w.type == quant::TypeId::F32 ? 4 : w.type == quant::TypeId::MXFP4 ? 1 : 2;
    if (w.offset % align || w.row_stride % align)
        throw std::invalid_argument(std::string("vulkan ") + op + ": weights must be " + std::to_string(align) +
                                    "-byte aligned (offset " + std::to_string(w.offset) + ", row stride " +
                                    std::to_string(w.row_stride) + ")");
}

void record_matmul(VulkanBackend& be, const Tensor& w, const Tensor& x, const Tensor& y) {
    const char* suffix = vulkan_type_suffix(w.type);
    if (!suffix) throw std::invalid_argument("vulkan matmul: unsupported weight type in W " + describe(w));
    if (x.type != quant::TypeId::F32 || y.type != quant::TypeId::F32 || x.ne0 != w.ne0 || y.ne0 != w.ne1 ||
        y.ne1 != x.ne1)
        throw std::invalid_argument("vulkan matmul: expected W [k, n], x [k, m] f32, y [n, m] f32; got W " + describe(w) +
                                    ", x " + describe(x) + ", y " + describe(y));
    require_weight_alignment(w, "matmul");
    if (x.offset % 4 || x.row_stride % 4 || y.offset % 4 || y.row_stride % 4)
        throw std::invalid_argument("vulkan matmul: x and y must be 4-byte aligned (offsets " + std::to_string(x.offset) +
                                    ", " + std::to_string(y.offset) + ")");
    const int64_t k = w.ne0, n_out = w.ne1, m = x.ne1;
    if (k == 0 || n_out == 0 || m == 0) return;

    // Row ranges of W and column ranges of x and y (and of the quantized x) that one binding each
    // can hold. y is bound per row range as the sub-view of those rows, never larger than its
    // whole columns.
    const int64_t rows_step = be.rows_per_binding(w);
    int64_t cols_step = std::min(be.rows_per_binding(x), be.rows_per_binding(y));
    const quant::TypeId act = activation_type(w.type);
    const uint64_t q_words = quantized_column_words(act, k);
    Tensor xq;  // [q_words, columns] the quantized activations in the scratch buffer
    if (q_words) {
        xq = Tensor{nullptr, 0, quant::TypeId::F32, static_cast<int64_t>(q_words), 0, q_words * 4};
        cols_step = std::min(cols_step, be.rows_per_binding(xq));
        xq.ne1 = std::min(cols_step, m);
        xq.buffer = &be.scratch(xq.row_stride * static_cast<size_t>(xq.ne1));
    }
    const std::string variant = matmul_variant(be, w.type, suffix);
    const int64_t n_x8 = cpu_x8_rows(w.type, n_out);
    const std::optional<Binding> codebook = be.iq_codebook(w.type);  // a 4th binding for the i-quants
    for (int64_t c0 = 0; c0 < m; c0 += cols_step) {
        const int64_t nc = std::min(cols_step, m - c0);
        const TileShape shape = nc == 1 ? kMatvecTile : kMatmulTile;
        const Pipeline& pipe = be.pipeline(variant, codebook ? 4 : 3, sizeof(MatmulParams), {shape.rows, shape.cols});
        Binding xb = be.bind_rows(x, c0, nc, Access::Read);
        uint32_t x_offset = xb.skip_bytes / 4, x_stride = to_u32(x.row_stride / 4, "x's row stride");
        if (q_words) {
            // Quantize the columns once; the matmul dispatches below read them (the backend puts
            // a barrier between the write and the reads).
            record_act_quant(be, act, k, x, c0, nc, xq, q_words);
            xb = be.bind_rows(xq, 0, nc, Access::Read);
            x_offset = xb.skip_bytes / 4;
            x_stride = static_cast<uint32_t>(q_words);
        }
        for (int64_t r0 = 0; r0 < n_out; r0 += rows_step) {
            const int64_t nr = std::min(rows_step, n_out - r0);
            const Binding wb = be.bind_rows(w, r0, nr, Access::Read);
            Tensor y_rows = y;  // outputs r0 .. r0 + nr of every column
            y_rows.offset += static_cast<size_t>(r0) * 4;
            y_rows.ne0 = nr;
            const Binding yb = be.bind_rows(y_rows, c0, nc, Access::Write);
            const MatmulParams params{to_u32(k, "k"),
                                      static_cast<uint32_t>(nr),
                                      static_cast<uint32_t>(nc),
                                      wb.skip_bytes,
                                      to_u32(w.row_stride, "W's row stride"),
                                      x_offset,
                                      x_stride,
                                      yb.skip_bytes / 4,
                                      to_u32(y.row_stride / 4, "y's row stride"),
                                      static_cast<uint32_t>(std::clamp<int64_t>(n_x8 - r0, 0, nr))};
            const uint64_t tiles = uint64_t{ceil_div(nr, shape.rows)} * ceil_div(nc, shape.cols);
            if (codebook) {
                be.dispatch(pipe, {wb, xb, yb, *codebook}, &params, be.groups(tiles));
            } else {
                be.dispatch(pipe, {wb, xb, yb}, &params, be.groups(tiles));
            }
        }
    }
}

}  // namespace deskside::backends::vulkan

namespace deskside::backends::vulkan {

void record_matmul_id(VulkanBackend& be, const Tensor& w, int64_t n_expert, const Tensor& x, const Tensor& ids,
                      const Tensor& y) {
    const char* op = "matmul_id";
    const char* suffix = vulkan_type_suffix(w.type);
    if (!suffix) throw std::invalid_argument("vulkan matmul_id: unsupported weight type in W " + describe(w));
    if (ids.empty() || ids.type != quant::TypeId::I32 || ids.row_stride != ids.row_bytes() || ids.offset % 4)
        throw std::invalid_argument("vulkan matmul_id: ids must be a contiguous I32 tensor [n_used, n], got " +
                                    (ids.empty() ? std::string("none") : describe(ids)));
    if (n_expert <= 0 || w.ne1 % n_expert != 0)
        throw std::invalid_argument("vulkan matmul_id: W " + describe(w) + " does not stack n_expert = " +
                                    std::to_string(n_expert) + " matrices");
    const int64_t k = w.ne0, n_out = w.ne1 / n_expert, n_used = ids.ne0, n = ids.ne1, total = n_used * n;
    const bool per_slot = x.ne1 == total;
    if (x.type != quant::TypeId::F32 || y.type != quant::TypeId::F32 || x.ne0 != k || (x.ne1 != n && !per_slot) ||
        y.ne0 != n_out || y.ne1 != total)
        throw std::invalid_argument(
            "vulkan matmul_id: expected W [k, n_expert * n_out], ids [n_used, n], x [k, n] or [k, n_used * n] f32, "
            "y [n_out, n_used * n] f32; got W " + describe(w) + ", ids " + describe(ids) + ", x " + describe(x) +
            ", y " + describe(y));
    require_weight_alignment(w, op);
    if (x.offset % 4 || x.row_stride % 4 || y.offset % 4 || y.row_stride % 4)
        throw std::invalid_argument("vulkan matmul_id: x and y must be 4-byte aligned (offsets " +
                                    std::to_string(x.offset) + ", " + std::to_string(y.offset) + ")");
    if (k == 0 || n_out == 0 || total == 0) return;

    // Experts are bound whole, as many as one binding holds; tokens in ranges whose x, y and
    // quantized x fit a binding each.
    const int64_t experts_step = be.rows_per_binding(w) / n_out;
    if (experts_step < 1)
        throw std::invalid_argument("vulkan matmul_id: one expert's matrix of W " + describe(w) +
                                    " exceeds the device's maxStorageBufferRange");
    const int64_t x_per_token = per_slot ? n_used : 1;
    int64_t tokens_step = std::min(be.rows_per_binding(x) / x_per_token, be.rows_per_binding(y) / n_used);
    const quant::TypeId act = activation_type(w.type);
    const uint64_t q_words = quantized_column_words(act, k);
    Tensor xq;  // [q_words, columns] the quantized activations in the scratch buffer
    if (q_words) {
        xq = Tensor{nullptr, 0, quant::TypeId::F32, static_cast<int64_t>(q_words), 0, q_words * 4};
        tokens_step = std::min(tokens_step, be.rows_per_binding(xq) / x_per_token);
    }
    tokens_step = std::max<int64_t>(1, std::min(tokens_step, n));
    if (q_words) {
        xq.ne1 = tokens_step * x_per_token;
        xq.buffer = &be.scratch(xq.row_stride * static_cast<size_t>(xq.ne1));
    }
    Tensor flat_ids = ids;  // the ids as one row of n_used * n words, slot order
    flat_ids.ne0 = total;
    flat_ids.ne1 = 1;
    flat_ids.row_stride = flat_ids.row_bytes();

    const std::string variant = "matmul_id_" + matmul_variant(be, w.type, suffix).substr(std::string("matmul_").size());
    const std::optional<Binding> codebook = be.iq_codebook(w.type);  // a 5th binding for the i-quants
    const Pipeline& pipe = be.pipeline(variant, codebook ? 5 : 4, sizeof(MatmulIdParams), {kMatvecTile.rows, 1});
    // Each expert is a matrix of its own to the CPU (n_out a multiple of 8: whole x8 groups).
    const int64_t chain_rows = n_out % 8 == 0 ? cpu_x8_rows(w.type, n_out) : 0;
    for (int64_t t0 = 0; t0 < n; t0 += tokens_step) {
        const int64_t nt = std::min(tokens_step, n - t0), nx = nt * x_per_token, nc = nt * n_used;
        Binding xb = be.bind_rows(x, t0 * x_per_token, nx, Access::Read);
        uint32_t x_offset = xb.skip_bytes / 4, x_stride = to_u32(x.row_stride / 4, "x's row stride");
        if (q_words) {
            record_act_quant(be, act, k, x, t0 * x_per_token, nx, xq, q_words);
            xb = be.bind_rows(xq, 0, nx, Access::Read);
            x_offset = xb.skip_bytes / 4;
            x_stride = static_cast<uint32_t>(q_words);
        }
        const Binding yb = be.bind_rows(y, t0 * n_used, nc, Access::Write);
        const Binding ib = be.bind_index(flat_ids, t0 * n_used, nc, op);
        for (int64_t e0 = 0; e0 < n_expert; e0 += experts_step) {
            const int64_t ne = std::min(experts_step, n_expert - e0);
            const Binding wb = be.bind_rows(w, e0 * n_out, ne * n_out, Access::Read);
            const MatmulIdParams params{{to_u32(k, "k"), static_cast<uint32_t>(n_out), static_cast<uint32_t>(nc),
                                         wb.skip_bytes, to_u32(w.row_stride, "W's row stride"), x_offset, x_stride,
                                         yb.skip_bytes / 4, to_u32(y.row_stride / 4, "y's row stride"),
                                         static_cast<uint32_t>(chain_rows)},
                                        to_u32(static_cast<uint64_t>(n_out) * w.row_stride, "an expert's bytes"),
                                        static_cast<uint32_t>(e0),
                                        static_cast<uint32_t>(ne),
                                        ib.skip_bytes / 4,
                                        static_cast<uint32_t>(per_slot ? 1 : n_used)};
            const uint64_t tiles = uint64_t{ceil_div(n_out, kMatvecTile.rows)} * static_cast<uint64_t>(nc);
            if (codebook) {
                be.dispatch(pipe, {wb, xb, yb, ib, *codebook}, &params, be.groups(tiles));
            } else {
                be.dispatch(pipe, {wb, xb, yb, ib}, &params, be.groups(tiles));
            }
        }
    }
}

}  // namespace deskside::backends::vulkan
