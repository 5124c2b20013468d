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
//
// Hugging Face checkpoints (GptOssForCausalLM) name the sinks "self_attn.sinks" and the router
// "mlp.router"; the experts are stored stacked, gate and up fused with their rows interleaved
// (gate even, up odd), as OpenAI's MXFP4 (U8 "_blocks" and "_scales") with "_bias" beside them. The
// checkpoint reader splits and repacks them as convert_hf_to_gguf.py's GptOssModel does. Configs
// whose SwiGLU constants or YaRN betas differ from the ones this forward pass has built in are refused.
// ref: transformers configuration_gpt_oss.py, modeling_gpt_oss.py, integrations/mxfp4.py.
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

constexpr HfNameRule kHfBlock[] = {
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.sinks", "attn_sinks", true},
    {"post_attention_layernorm", "post_attention_norm"},
    {"mlp.router", "ffn_gate_inp"},
    // gate and up interleaved row by row; the checkpoint reader splits this into ffn_gate_exps / ffn_up_exps
    {"mlp.experts.gate_up_proj", "ffn_gate_up_exps", true},
    {"mlp.experts.down_proj", "ffn_down_exps", true},
};

// GptOssConfig's defaults; layer_types' default (even layers sliding) is sliding_layers below.
constexpr std::string_view kDefaults = R"({
    "vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 36,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5, "tie_word_embeddings": false, "sliding_window": 128, "num_local_experts": 128,
    "num_experts_per_tok": 4, "swiglu_limit": 7.0, "attention_bias": true, "rope_theta": 150000.0,
    "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
                     "original_max_position_embeddings": 4096}})";

std::vector<bool> sliding_layers(const JsonFields&, int64_t n_layer) {
    std::vector<bool> swa(static_cast<size_t>(n_layer));
    for (int64_t i = 0; i < n_layer; ++i) swa[static_cast<size_t>(i)] = i % kSwaPattern == 0;
    return swa;
}

constexpr std::array kHfTypes{HfModelType{"gpt_oss", "GptOssForCausalLM", kDefaults, sliding_layers}};

int64_t positive(const JsonFields& f, std::string_view key) {
    const auto v = f.opt_int(key);
    if (!v || *v <= 0) f.fail(key, "must be a positive integer");
    return *v;
}

void require(const JsonFields& f, std::string_view key, double built_in) {
    if (const auto v = f.opt_float(key); v && std::abs(*v - built_in) > 1e-6 * built_in)
        f.fail(key, "deskside's gpt-oss runs " + std::to_string(built_in) + " only, as llama.cpp does");
}

void hf_quirks(const JsonFields& f, Hparams& hp) {
    hp.n_expert = positive(f, "num_local_experts");
    // transformers reads "experts_per_token" (OpenAI's original name) as num_experts_per_tok
    hp.n_expert_used = positive(f, f.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token");
    if (hp.n_expert_used > hp.n_expert)
        f.fail("num_experts_per_tok",
               std::to_string(hp.n_expert_used) + " exceeds num_local_experts " + std::to_string(hp.n_expert));
    hp.n_ff_exp = hp.n_ff;  // intermediate_size is each expert's
    if (f.opt_bool("attention_bias") == std::optional<bool>(false))
        f.fail("attention_bias", "deskside's gpt-oss reads Q/K/V/output biases (true)");
    require(f, "swiglu_limit", 7.0);
    require(f, "swiglu_alpha", 1.702);
    for (std::string_view key : {"rope_scaling", "rope_parameters"}) {
        if (const auto rope = f.opt_object(key)) {
            require(*rope, "beta_fast", 32.0);
            require(*rope, "beta_slow", 1.0);
        }
    }
}

}  // namespace

const Family kGptOssFamily{
    .name = "gpt-oss",
    .tensors = kTensors,
    .rope = RopeStyle::Neox,
    .gguf_quirks = gguf_quirks,
    .hf_types = kHfTypes,
    .hf_block = kHfBlock,
    .hf_quirks = hf_quirks,
    .activation = FfnActivation::SwigluOai,
    .attention_scale = inverse_sqrt_head_dim,
    .moe = true,
    .gating = ExpertGating::TopKThenSoftmax,
};

}  // namespace deskside::models
