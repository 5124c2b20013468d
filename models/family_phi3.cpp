// Phi-3 / Phi-3.5 / Phi-4-mini (general.architecture = "phi3"): the Llama block with Q, K and V
// fused into one matrix (attn_qkv: rows Q, then K, then V) and gate and up fused into ffn_up
// (first n_ff rows gate, then up; SwiGLU); NEOX RoPE. 128k-context models use LongRoPE: per-
// frequency divisors rope_factors_short for contexts up to rope.scaling.original_context_length
// and rope_factors_long beyond it (llama.cpp chooses by the context the model is run with), and
// cos and sin multiplied by rope.scaling.attn_factor. The fused matrices are split into their
// row ranges at load (a row's dot product does not change), so the shared forward pass runs as is.
// ref: Abdin et al., "Phi-3 Technical Report" (arXiv:2404.14219); Ding et al., "LongRoPE"
// (arXiv:2402.13753); transformers modeling_phi3.py (Phi3LongRoPEScaledRotaryEmbedding).
#include <array>

#include "models/family.h"

namespace deskside::models {
namespace {

constexpr std::array kTensors{
    TensorSpec{Role::TokenEmbd, "token_embd.weight", true},
    TensorSpec{Role::OutputNorm, "output_norm.weight", true},
    TensorSpec{Role::Output, "output.weight", false},
    TensorSpec{Role::RopeFactorsShort, "rope_factors_short.weight", false},
    TensorSpec{Role::RopeFactorsLong, "rope_factors_long.weight", false},
    TensorSpec{Role::AttnNorm, "attn_norm.weight", true},
    TensorSpec{Role::AttnQkv, "attn_qkv.weight", true},
    TensorSpec{Role::AttnOutput, "attn_output.weight", true},
    TensorSpec{Role::FfnNorm, "ffn_norm.weight", true},
    TensorSpec{Role::FfnGateUp, "ffn_up.weight", true},
    TensorSpec{Role::FfnDown, "ffn_down.weight", true},
};

}  // namespace

const Family kPhi3Family{
    .name = "phi3",
    .tensors = kTensors,
    .rope = RopeStyle::Neox,
    .activation = FfnActivation::Silu,
    .attention_scale = inverse_sqrt_head_dim,
    .fused_qkv = true,
    .fused_gate_up = true,
    .long_rope = true,
};

}  // namespace deskside::models
