// A hook for tools that watch what the forward pass multiplies (`deskside imatrix`): with an
// observer set (Model::set_observer), the Model hands it the input activations of every layer
// weight matrix before the matmul that reads them, copied to the host. Without one the forward
// pass issues exactly the ops it always does, with no copy and no synchronisation.
//
// A weight is named as in the GGUF file ("blk.0.attn_q.weight"); a fused tensor (attn_qkv,
// Phi-3's ffn_up holding gate and up) is reported once per step, under its own name, since its
// parts read the same input. The output head is not reported (llama-imatrix leaves it out too
// unless asked). Activations are rows of n_cols floats (one row per token, or per token and
// expert slot), row-major.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace deskside::engine {

class ActivationObserver {
   public:
    virtual ~ActivationObserver() = default;
    // y = W x: each of x's rows is multiplied by the whole matrix `weight`.
    virtual void matmul(std::string_view weight, std::span<const float> x, int64_t n_cols) = 0;
    // The expert matmul over stacked experts `weight` (n_expert matrices): slot s of token t
    // (ids[t * n_used + s], an expert index) reads row t of x when x has one row per token, or row
    // t * n_used + s when it has one per slot.
    virtual void matmul_id(std::string_view weight, int64_t n_expert, std::span<const float> x, int64_t n_cols,
                           std::span<const int32_t> ids, int64_t n_used) = 0;
};

}  // namespace deskside::engine
