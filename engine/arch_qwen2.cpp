// Qwen 2 / 2.5 (general.architecture = "qwen2"): the Llama block with Q/K/V biases and NEOX
// RoPE ordering (models::Hparams::rope_neox); small models tie the output head to the
// embedding. ref: Qwen2 technical report (arXiv:2407.10671).
#include <array>

#include "engine/arch.h"

namespace deskside::engine {
namespace {

constexpr std::array kTensors{
    TensorSpec{Role::TokenEmbd, "token_embd.weight", true},
    TensorSpec{Role::OutputNorm, "output_norm.weight", true},
    TensorSpec{Role::Output, "output.weight", false},
    TensorSpec{Role::AttnNorm, "attn_norm.weight", true},
    TensorSpec{Role::AttnQ, "attn_q.weight", true},
    TensorSpec{Role::AttnK, "attn_k.weight", true},
    TensorSpec{Role::AttnV, "attn_v.weight", true},
    TensorSpec{Role::AttnQBias, "attn_q.bias", true},
    TensorSpec{Role::AttnKBias, "attn_k.bias", true},
    TensorSpec{Role::AttnVBias, "attn_v.bias", true},
    TensorSpec{Role::AttnOutput, "attn_output.weight", true},
    TensorSpec{Role::FfnNorm, "ffn_norm.weight", true},
    TensorSpec{Role::FfnGate, "ffn_gate.weight", true},
    TensorSpec{Role::FfnUp, "ffn_up.weight", true},
    TensorSpec{Role::FfnDown, "ffn_down.weight", true},
};

}  // namespace

const ArchSpec kQwen2Arch{
    .name = "qwen2",
    .tensors = kTensors,
    .activation = FfnActivation::Silu,
    .attention_scale = inverse_sqrt_head_dim,
};

}  // namespace deskside::engine
