// Llama 1/2/3, Mistral, TinyStories (general.architecture = "llama").
//
// Pre-norm blocks with SwiGLU FFN; RoPE over adjacent pairs (GGUF stores Q and K permuted for
// that ordering); optional Q/K/V biases as some fine-tunes carry; Llama 3.1 files may carry
// rope_freqs. ref: Touvron et al., "Llama 2" (arXiv:2307.09288).
#include <array>

#include "engine/arch.h"

namespace deskside::engine {
namespace {

constexpr std::array kTensors{
    TensorSpec{Role::TokenEmbd, "token_embd.weight", true},
    TensorSpec{Role::OutputNorm, "output_norm.weight", true},
    TensorSpec{Role::Output, "output.weight", false},  // absent = tied to token_embd
    TensorSpec{Role::RopeFreqs, "rope_freqs.weight", false},
    TensorSpec{Role::AttnNorm, "attn_norm.weight", true},
    TensorSpec{Role::AttnQ, "attn_q.weight", true},
    TensorSpec{Role::AttnK, "attn_k.weight", true},
    TensorSpec{Role::AttnV, "attn_v.weight", true},
    TensorSpec{Role::AttnQBias, "attn_q.bias", false},
    TensorSpec{Role::AttnKBias, "attn_k.bias", false},
    TensorSpec{Role::AttnVBias, "attn_v.bias", false},
    TensorSpec{Role::AttnOutput, "attn_output.weight", true},
    TensorSpec{Role::FfnNorm, "ffn_norm.weight", true},
    TensorSpec{Role::FfnGate, "ffn_gate.weight", true},
    TensorSpec{Role::FfnUp, "ffn_up.weight", true},
    TensorSpec{Role::FfnDown, "ffn_down.weight", true},
};

}  // namespace

const ArchSpec kLlamaArch{
    .name = "llama",
    .tensors = kTensors,
    .activation = FfnActivation::Silu,
    .attention_scale = inverse_sqrt_head_dim,
};

}  // namespace deskside::engine
