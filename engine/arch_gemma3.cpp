// Gemma 3 text models (general.architecture = "gemma3").
//
// Differences from Llama: the embedding is scaled by sqrt(n_embd); Q and K are RMS-normed per
// head; the attention and FFN outputs are RMS-normed again before the residual add
// (post_attention_norm, post_ffw_norm); the FFN is GeGLU with tanh-approximated GELU; local
// (sliding-window) layers alternate with global ones, each with its own RoPE base; the output
// head is tied. GGUF norm weights already include Gemma's "+1". Queries are scaled by
// query_pre_attn_scalar^-1/2 with query_pre_attn_scalar = head_dim, except the 27B model
// (62 layers) which uses n_embd / n_head, as llama.cpp does.
// ref: Gemma 3 technical report (arXiv:2503.19786); google-deepmind/gemma gemma/modules.py.
#include <array>
#include <cmath>

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
    TensorSpec{Role::AttnQNorm, "attn_q_norm.weight", true},
    TensorSpec{Role::AttnKNorm, "attn_k_norm.weight", true},
    TensorSpec{Role::AttnOutput, "attn_output.weight", true},
    TensorSpec{Role::PostAttnNorm, "post_attention_norm.weight", true},
    TensorSpec{Role::FfnNorm, "ffn_norm.weight", true},
    TensorSpec{Role::FfnGate, "ffn_gate.weight", true},
    TensorSpec{Role::FfnUp, "ffn_up.weight", true},
    TensorSpec{Role::FfnDown, "ffn_down.weight", true},
    TensorSpec{Role::PostFfnNorm, "post_ffw_norm.weight", true},
};

constexpr int64_t kGemma3_27bLayers = 62;

float gemma3_attention_scale(const models::Hparams& hp) {
    const int64_t scalar = hp.n_layer == kGemma3_27bLayers ? hp.n_embd / hp.n_head : hp.head_dim;
    return 1.0f / std::sqrt(static_cast<float>(scalar));
}

}  // namespace

const ArchSpec kGemma3Arch{
    .name = "gemma3",
    .tensors = kTensors,
    .activation = FfnActivation::GeluTanh,
    .scale_embeddings = true,
    .attention_scale = gemma3_attention_scale,
    .prescale_queries = true,
    .swa_layers_unscaled_rope = true,
};

}  // namespace deskside::engine
