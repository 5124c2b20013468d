// Phi-3 / Phi-3.5 / Phi-4-mini (general.architecture = "phi3"): the Llama block with Q, K and V
// fused into one matrix (attn_qkv: rows Q, then K, then V) and gate and up fused into ffn_up
// (first n_ff rows gate, then up; SwiGLU); NEOX RoPE. 128k-context models use LongRoPE: per-
// frequency divisors rope_factors_short for contexts up to rope.scaling.original_context_length
// and rope_factors_long beyond it (llama.cpp chooses by the context the model is run with), and
// cos and sin multiplied by rope.scaling.attn_factor. The fused matrices are split into their
// row ranges at load (a row's dot product does not change), so the shared forward pass runs as is.
// ref: Abdin et al., "Phi-3 Technical Report" (arXiv:2404.14219); Ding et al., "LongRoPE"
// (arXiv:2402.13753); transformers modeling_phi3.py (Phi3LongRoPEScaledRotaryEmbedding),
// configuration_phi3.py.
//
// Hugging Face checkpoints (Phi3ForCausalLM) keep both fusions (qkv_proj, gate_up_proj) as GGUF
// does; LongRoPE's factors are lists in config.json's rope_scaling, which llama.cpp's converter
// turns into the rope_factors tensors (models/hf_config.cpp reads them). A sliding_window, where
// the config states one, applies to every layer.
#include <array>

#include "models/family.h"
#include "models/hf_json.h"

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

constexpr HfNameRule kHfBlock[] = {
    {"input_layernorm", "attn_norm"},         {"self_attn.qkv_proj", "attn_qkv"}, {"self_attn.o_proj", "attn_output"},
    {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_up_proj", "ffn_up"},     {"mlp.down_proj", "ffn_down"},
};

std::vector<bool> sliding_layers(const JsonFields& f, int64_t n_layer) {
    return std::vector<bool>(static_cast<size_t>(n_layer), f.has("sliding_window"));
}

constexpr std::array kHfTypes{
    HfModelType{"phi3", "Phi3ForCausalLM", R"({
        "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
        "num_attention_heads": 32, "max_position_embeddings": 4096, "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false, "sliding_window": null})",
                sliding_layers},
};

}  // namespace

const Family kPhi3Family{
    .name = "phi3",
    .tensors = kTensors,
    .rope = RopeStyle::Neox,
    .hf_types = kHfTypes,
    .hf_block = kHfBlock,
    .activation = FfnActivation::Silu,
    .attention_scale = inverse_sqrt_head_dim,
    .fused_qkv = true,
    .fused_gate_up = true,
    .long_rope = true,
};

}  // namespace deskside::models
