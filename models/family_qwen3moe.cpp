// Qwen 3 mixture-of-experts models (general.architecture = "qwen3moe": Qwen3-30B-A3B,
// Qwen3-235B-A22B): Qwen 3's attention; every layer's FFN is n_expert SwiGLU experts of size
// expert_feed_forward_length, stored merged (ffn_{gate,up,down}_exps), of which each token uses
// expert_used_count: softmax over the router's logits, the top k, their weights renormalised to
// sum 1 (norm_topk_prob, true in every released model; llama.cpp always renormalises this family).
// feed_forward_length is present in the files but unused. Hugging Face checkpoints of this family
// store each expert separately and are not read (convert to GGUF).
// ref: Qwen3 technical report (arXiv:2505.09388) section 2; transformers modeling_qwen3_moe.py.
#include <array>

#include "models/family.h"

namespace deskside::models {
namespace {

constexpr std::array kTensors{
    TensorSpec{Role::TokenEmbd, "token_embd.weight", true},
    TensorSpec{Role::OutputNorm, "output_norm.weight", true},
    TensorSpec{Role::Output, "output.weight", false},
    TensorSpec{Role::AttnNorm, "attn_norm.weight", true},
    TensorSpec{Role::AttnQ, "attn_q.weight", true},
    TensorSpec{Role::AttnK, "attn_k.weight", true},
    TensorSpec{Role::AttnV, "attn_v.weight", true},
    TensorSpec{Role::AttnQNorm, "attn_q_norm.weight", true},
    TensorSpec{Role::AttnKNorm, "attn_k_norm.weight", true},
    TensorSpec{Role::AttnOutput, "attn_output.weight", true},
    TensorSpec{Role::FfnNorm, "ffn_norm.weight", true},
    TensorSpec{Role::FfnGateInp, "ffn_gate_inp.weight", true},
    TensorSpec{Role::FfnGateExps, "ffn_gate_exps.weight", true},
    TensorSpec{Role::FfnUpExps, "ffn_up_exps.weight", true},
    TensorSpec{Role::FfnDownExps, "ffn_down_exps.weight", true},
};

}  // namespace

const Family kQwen3MoeFamily{
    .name = "qwen3moe",
    .tensors = kTensors,
    .rope = RopeStyle::Neox,
    .activation = FfnActivation::Silu,
    .attention_scale = inverse_sqrt_head_dim,
    .moe = true,
    .gating = ExpertGating::SoftmaxThenTopK,
    .normalize_expert_weights = true,
};

}  // namespace deskside::models
