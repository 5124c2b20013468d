// gpt-oss (general.architecture = "gpt-oss": gpt-oss-20b, gpt-oss-120b).
//
// Attention with Q/K/V and output biases and one learned sink logit per head (it joins each
// softmax's denominator, with no value); even layers attend through a sliding window
// (attention.sliding_window; the files carry no pattern key: llama.cpp's default for the family
// is every second layer global); YaRN RoPE (NEOX). The FFN is a mixture of experts: a router with
// bias, the top k of its raw logits, weights = softmax over those k; each expert a clamped SwiGLU
// (gate <= 7, up in [-7, 7], out = gate * sigmoid(1.702 gate) * (up + 1)) with biases on gate,
// up and down; the FFN norm is stored as post_attention_norm. Experts ship as MXFP4.
// ref: OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card" (arXiv:2508.10925); openai/gpt-oss
// gpt_oss/torch/model.py (AttentionBlock sinks, MLPBlock swiglu).
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
    TensorSpec{Role::AttnQBias, "attn_q.bias", true},
    TensorSpec{Role::AttnKBias, "attn_k.bias", true},
    TensorSpec{Role::AttnVBias, "attn_v.bias", true},
    TensorSpec{Role::AttnOutput, "attn_output.weight", true},
    TensorSpec{Role::AttnOutputBias, "attn_output.bias", true},
    TensorSpec{Role::AttnSinks, "attn_sinks.weight", true},
    TensorSpec{Role::FfnNorm, "post_attention_norm.weight", true},
    TensorSpec{Role::FfnGateInp, "ffn_gate_inp.weight", true},
    TensorSpec{Role::FfnGateInpBias, "ffn_gate_inp.bias", true},
    TensorSpec{Role::FfnGateExps, "ffn_gate_exps.weight", true},
    TensorSpec{Role::FfnUpExps, "ffn_up_exps.weight", true},
    TensorSpec{Role::FfnDownExps, "ffn_down_exps.weight", true},
    TensorSpec{Role::FfnGateExpsBias, "ffn_gate_exps.bias", true},
    TensorSpec{Role::FfnUpExpsBias, "ffn_up_exps.bias", true},
    TensorSpec{Role::FfnDownExpsBias, "ffn_down_exps.bias", true},
};

constexpr int64_t kSwaPattern = 2;  // layer % 2 == 1 global

void gguf_quirks(Hparams& hp) {
    if (hp.sliding_window > 0 && hp.sliding_window_pattern == 0 && hp.swa_layers.empty())
        hp.sliding_window_pattern = kSwaPattern;
}

}  // namespace

const Family kGptOssFamily{
    .name = "gpt-oss",
    .tensors = kTensors,
    .rope = RopeStyle::Neox,
    .gguf_quirks = gguf_quirks,
    .activation = FfnActivation::SwigluOai,
    .attention_scale = inverse_sqrt_head_dim,
    .moe = true,
    .gating = ExpertGating::TopKThenSoftmax,
};

}  // namespace deskside::models
