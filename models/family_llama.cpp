// Llama 1/2/3, Mistral, TinyStories (general.architecture = "llama").
//
// Pre-norm blocks with SwiGLU FFN; RoPE over adjacent pairs (GGUF stores Q and K permuted for
// that ordering); optional Q/K/V biases as some fine-tunes carry; Llama 3.1 files may carry
// rope_freqs. Mistral checkpoints are this family too (head size may differ from n_embd / n_head,
// as in Mistral-Nemo: attention.key_length); Mistral 7B v0.1 attends through a sliding window.
// ref: Touvron et al., "Llama 2" (arXiv:2307.09288); transformers modeling_llama.py,
// modeling_mistral.py (module names), configuration_llama.py, configuration_mistral.py (defaults).
#include <array>

#include "models/family.h"
#include "models/hf_json.h"

namespace deskside::models {
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

// Mistral: every layer slides when the config names a window.
std::vector<bool> mistral_sliding(const JsonFields& f, int64_t n_layer) {
    return std::vector<bool>(static_cast<size_t>(n_layer), f.has("sliding_window"));
}

constexpr std::array kHfTypes{
    HfModelType{"llama", "LlamaForCausalLM", R"({
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": false})"},
    HfModelType{"mistral", "MistralForCausalLM", R"({
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false})",
                mistral_sliding},
};

}  // namespace

namespace {
constexpr HfNameRule kLlamaBlockRules[] = {
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
};
}  // namespace

const std::span<const HfNameRule> kLlamaHfBlock = kLlamaBlockRules;

const Family kLlamaFamily{
    .name = "llama",
    .tensors = kTensors,
    .rope = RopeStyle::AdjacentPairs,
    .hf_types = kHfTypes,
    .hf_block = kLlamaHfBlock,
    .activation = FfnActivation::Silu,
    .attention_scale = inverse_sqrt_head_dim,
};

}  // namespace deskside::models
