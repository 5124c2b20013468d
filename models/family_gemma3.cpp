// Gemma 3 text models (general.architecture = "gemma3").
//
// Differences from Llama: the embedding is scaled by sqrt(n_embd); Q and K are RMS-normed per
// head; the attention and FFN outputs are RMS-normed again before the residual add
// (post_attention_norm, post_ffw_norm); the FFN is GeGLU with tanh-approximated GELU; local
// (sliding-window) layers alternate with global ones, each with its own RoPE base (GGUF files do
// not store the local base: 10000; nor, in older files, the pattern: every 6th layer global);
// the output head is tied. GGUF norm weights already include Gemma's "+1"; Hugging Face
// checkpoints store w and compute x * (1 + w). Queries are scaled by query_pre_attn_scalar^-1/2
// with query_pre_attn_scalar = head_dim, except the 27B model (62 layers) which uses
// n_embd / n_head, as llama.cpp does.
// ref: Gemma 3 technical report (arXiv:2503.19786); google-deepmind/gemma gemma/modules.py;
// transformers modeling_gemma3.py, configuration_gemma3.py.
#include <array>
#include <cmath>

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
constexpr double kLocalRopeBase = 10000.0;  // ref: Gemma 3 technical report, section 2
constexpr int64_t kDefaultSwaPattern = 6;

float attention_scale(const Hparams& hp) {
    const int64_t scalar = hp.n_layer == kGemma3_27bLayers ? hp.n_embd / hp.n_head : hp.head_dim;
    return 1.0f / std::sqrt(static_cast<float>(scalar));
}

void gguf_quirks(Hparams& hp) {
    if (hp.rope_freq_base_swa == 0.0) hp.rope_freq_base_swa = kLocalRopeBase;
    if (hp.sliding_window_pattern == 0 && hp.sliding_window > 0 && hp.swa_layers.empty())
        hp.sliding_window_pattern = kDefaultSwaPattern;
}

// Every sliding_window_pattern-th layer is global.
std::vector<bool> sliding_layers(const JsonFields& f, int64_t n_layer) {
    const auto pattern = f.opt_int("sliding_window_pattern");
    if (!pattern || *pattern <= 0) f.fail("sliding_window_pattern", "must be a positive integer");
    std::vector<bool> swa(static_cast<size_t>(n_layer));
    for (int64_t i = 0; i < n_layer; ++i) swa[static_cast<size_t>(i)] = (i + 1) % *pattern != 0;
    return swa;
}

void hf_quirks(const JsonFields& f, Hparams& hp) {
    hp.norm_weight_plus_one = true;  // Gemma3RMSNorm computes x * (1 + w)
    // transformers 5's rope_parameters.sliding_attention.rope_theta (read before this) wins.
    if (hp.rope_freq_base_swa == 0.0) hp.rope_freq_base_swa = f.opt_float("rope_local_base_freq").value_or(kLocalRopeBase);
    // A Gemma 3 with fewer layers than its pattern keeps the pattern, as its GGUF would.
    if (hp.sliding_window > 0 && hp.swa_layers.empty() && hp.sliding_window_pattern == 0 && !f.has("layer_types")) {
        if (const auto pattern = f.opt_int("sliding_window_pattern")) hp.sliding_window_pattern = *pattern;
    }
}

constexpr std::string_view kTextDefaults = R"({
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window": 4096,
    "sliding_window_pattern": 6, "tie_word_embeddings": true})";

constexpr std::array kHfTypes{
    HfModelType{"gemma3_text", "Gemma3ForCausalLM", kTextDefaults, sliding_layers},
    HfModelType{"gemma3", "Gemma3ForConditionalGeneration", kTextDefaults, sliding_layers, true},
};

// Gemma 3 norms both sides of attention and of the FFN, and normalizes Q and K per head.
constexpr HfNameRule kHfBlock[] = {
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"self_attn.o_proj", "attn_output"},
    {"post_attention_layernorm", "post_attention_norm"},
    {"pre_feedforward_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"post_feedforward_layernorm", "post_ffw_norm"},
};

}  // namespace

const Family kGemma3Family{
    .name = "gemma3",
    .tensors = kTensors,
    .rope = RopeStyle::Neox,
    .gguf_quirks = gguf_quirks,
    .hf_types = kHfTypes,
    .hf_block = kHfBlock,
    .hf_quirks = hf_quirks,
    .activation = FfnActivation::GeluTanh,
    .scale_embeddings = true,
    .attention_scale = attention_scale,
    .prescale_queries = true,
    .swa_layers_unscaled_rope = true,
};

}  // namespace deskside::models
