// Qwen 3 dense models (general.architecture = "qwen3"): the Qwen 2 block without Q/K/V biases and
// with per-head RMS norms of Q and K before RoPE (NEOX); head size is not n_embd / n_head
// (attention.key_length, 128 in every released size).
// ref: Qwen3 technical report (arXiv:2505.09388); transformers modeling_qwen3.py, configuration_qwen3.py.
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
    TensorSpec{Role::FfnGate, "ffn_gate.weight", true},
    TensorSpec{Role::FfnUp, "ffn_up.weight", true},
    TensorSpec{Role::FfnDown, "ffn_down.weight", true},
};

constexpr HfNameRule kHfBlock[] = {
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"self_attn.o_proj", "attn_output"},
    {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
};

constexpr std::array kHfTypes{
    HfModelType{"qwen3", "Qwen3ForCausalLM", R"({
        "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "use_sliding_window": false, "sliding_window": 4096,
        "max_window_layers": 28, "tie_word_embeddings": false})",
                qwen_sliding_layers},
};

}  // namespace

const Family kQwen3Family{
    .name = "qwen3",
    .tensors = kTensors,
    .rope = RopeStyle::Neox,
    .hf_types = kHfTypes,
    .hf_block = kHfBlock,
    .activation = FfnActivation::Silu,
    .attention_scale = inverse_sqrt_head_dim,
};

}  // namespace deskside::models
