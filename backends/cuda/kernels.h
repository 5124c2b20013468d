// The CUDA kernels' launch functions: the contract between the CUDA backend (cuda_backend.cu,
// which owns memory, streams and graphs and checks every op's arguments) and the kernel files
// (kernels_*.cu), which only launch work on the stream they are given.
//
// This header is plain C++ (no CUDA types but the opaque stream), so both sides and the host
// tests can include it. DevTensor is Tensor (backends/backend.h) resolved to a device address;
// every pointer here is device memory. Launchers never synchronize and never allocate: scratch
// comes from the caller, sized by the *_scratch_bytes functions, so every launch can be captured
// in a CUDA graph.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/backend.h"
#include "quant/types.h"

typedef struct CUstream_st* cudaStream_t;

namespace deskside::backends::cuda {

struct DevTensor {
    uint8_t* data = nullptr;  // row 0
    quant::TypeId type = quant::TypeId::F32;
    int64_t ne0 = 0, ne1 = 0;
    size_t row_stride = 0;  // bytes
};

// ---- weights (kernels_matmul.cu, kernels_get_rows.cu) -----------------------------------------
// y = W x as Backend::matmul, with the CPU backend's bits at its AVX2 level: x is quantized on the
// device to W's vec_dot_type exactly as the CPU does it, then each output is summed in the CPU's
// order (device/exact_dot.cuh; rows the CPU keeps row-interleaved in its x8 chain), an order that
// depends on the row alone, never on m or the tile (batch invariance).
size_t matmul_scratch_bytes(quant::TypeId w_type, int64_t k, int64_t m);
void launch_matmul(cudaStream_t stream, const DevTensor& w, const DevTensor& x, const DevTensor& y, void* scratch);
// dst row i = table row ids[i] as F32, bit-identical to quant::to_float.
void launch_get_rows(cudaStream_t stream, const DevTensor& table, const int32_t* ids, int64_t n_ids,
                     const DevTensor& dst);
// Which weight / table types the kernels above handle.
bool matmul_supported(quant::TypeId w_type);
// The m rows of x quantized to W's vec_dot_type as launch_matmul quantizes them, into scratch
// rows matmul_act_stride(w_type, k) bytes apart (F32 W: nothing to quantize, stride 0).
size_t matmul_act_stride(quant::TypeId w_type, int64_t k);
void launch_quantize_activations(cudaStream_t stream, quant::TypeId w_type, const DevTensor& x, void* scratch);

// ---- mixture of experts (kernels_moe.cu) ---------------------------------------------------------
// Backend::moe_route: ids and weights are [n_used, n] (row strides in bytes).
void launch_moe_route(cudaStream_t stream, const DevTensor& logits, const MoeRouteParams& p, int32_t* ids,
                      size_t ids_stride, const DevTensor& weights);
// Backend::matmul_id: w stacks n_expert matrices; ids [n_used, n] contiguous. Each output row gets
// the CPU backend's matmul_id bits for its expert (launch_matmul's per-output arithmetic; the x8
// chain only where an expert's n_out is a multiple of 8, as the CPU). An id outside [0, n_expert)
// leaves its row unwritten.
size_t matmul_id_scratch_bytes(quant::TypeId w_type, int64_t k, int64_t x_rows);
void launch_matmul_id(cudaStream_t stream, const DevTensor& w, int64_t n_expert, const DevTensor& x,
                      const int32_t* ids, int64_t n_used, const DevTensor& y, void* scratch);
// Backend::add_id (ids in slot order; an id outside [0, b.ne1) gives a NaN row), moe_combine and
// swiglu_oai, with the CPU's float operations.
void launch_add_id(cudaStream_t stream, const DevTensor& a, const DevTensor& b, const int32_t* ids, const DevTensor& y);
void launch_moe_combine(cudaStream_t stream, const DevTensor& y, const DevTensor& weights, const DevTensor& out);
void launch_swiglu_oai(cudaStream_t stream, const DevTensor& gate, const DevTensor& up, float alpha, float limit,
                       const DevTensor& y);

// ---- attention (kernels_attention.cu) -----------------------------------------------------------
// Backend::attention over the paged cache; `args` is the I32 argument tensor described at
// kAttentionQueryWords. The CPU backend's bits: one sequential softmax chain per (query, head),
// never split, so neither the batch nor the context length changes the order. No scratch.
// sinks: AttentionParams::sinks on the device (n_head floats), or nullptr.
void launch_attention(cudaStream_t stream, const DevTensor& q, const DevTensor& k_cache, const DevTensor& v_cache,
                      int64_t block_size, const int32_t* args, const AttentionParams& p, const float* sinks,
                      const DevTensor& out);
bool attention_supported(quant::TypeId k_type, quant::TypeId v_type);

// ---- the rest (kernels_elementwise.cu, kernels_norm_rope.cu, kernels_copy.cu) -------------------
void launch_rms_norm(cudaStream_t stream, const DevTensor& x, const DevTensor& weight, float eps, const DevTensor& y);
// rotations: [n_rot / 2 pairs of (cos, sin)] per position, the table the backend built for
// these RopeParams (positions < n_ctx); positions: n_tokens ids.
void launch_rope(cudaStream_t stream, const DevTensor& x, const int32_t* positions, const float* rotations,
                 const RopeParams& p);
void launch_silu(cudaStream_t stream, const DevTensor& x, const DevTensor& y);
void launch_gelu(cudaStream_t stream, const DevTensor& x, const DevTensor& y);
void launch_add(cudaStream_t stream, const DevTensor& a, const DevTensor& b, const DevTensor& y);
void launch_mul(cudaStream_t stream, const DevTensor& a, const DevTensor& b, const DevTensor& y);
void launch_scale(cudaStream_t stream, const DevTensor& x, float s, const DevTensor& y);
// dst = src converted (copy), or dst row rows[i] = src row i (set_rows; rows == nullptr: copy).
void launch_convert_rows(cudaStream_t stream, const DevTensor& src, const DevTensor& dst, const int32_t* rows);

}  // namespace deskside::backends::cuda
