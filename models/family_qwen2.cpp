// Qwen 2 / 2.5 and the DeepSeek-R1 distills of them (general.architecture = "qwen2"): the Llama
// block with Q/K/V biases and NEOX RoPE; small models tie the output head to the embedding.
// ref: Qwen2 technical report (arXiv:2407.10671); transformers modeling_qwen2.py,
// configuration_qwen2.py.
#include <algorithm>
#include <array>

#include "models/family.h"
#include "models/hf_json.h"

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
    TensorSpec{Role::FfnNorm, "ffn_norm.weight", true},
    TensorSpec{Role::FfnGate, "ffn_gate.weight", true},
    TensorSpec{Role::FfnUp, "ffn_up.weight", true},
    TensorSpec{Role::FfnDown, "ffn_down.weight", true},
};

constexpr std::array kHfTypes{
    HfModelType{"qwen2", "Qwen2ForCausalLM", R"({
        "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "use_sliding_window": false, "sliding_window": 4096, "max_window_layers": 28,
        "tie_word_embeddings": false})",
                qwen_sliding_layers},
};

}  // namespace

std::vector<bool> qwen_sliding_layers(const JsonFields& f, int64_t n_layer) {
    std::vector<bool> swa(static_cast<size_t>(n_layer), false);
    if (f.opt_bool("use_sliding_window").value_or(false) && f.has("sliding_window")) {
        const int64_t first = f.opt_int("max_window_layers").value_or(0);
        for (int64_t i = std::max<int64_t>(first, 0); i < n_layer; ++i) swa[static_cast<size_t>(i)] = true;
    }
    return swa;
}

const Family kQwen2Family{
    .name = "qwen2",
    .tensors = kTensors,
    .rope = RopeStyle::Neox,
    .hf_types = kHfTypes,
    .hf_block = kLlamaHfBlock,
    .activation = FfnActivation::Silu,
    .attention_scale = inverse_sqrt_head_dim,
};

}  // namespace deskside::models
