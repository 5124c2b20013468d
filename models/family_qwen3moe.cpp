// Qwen 3 mixture-of-experts models (general.architecture = "qwen3moe": Qwen3-30B-A3B,
// Qwen3-235B-A22B): Qwen 3's attention; every layer's FFN is n_expert SwiGLU experts of size
// expert_feed_forward_length, stored merged (ffn_{gate,up,down}_exps), of which each token uses
// expert_used_count: softmax over the router's logits, the top k, their weights renormalised to
// sum 1 (norm_topk_prob, true in every released model; llama.cpp always renormalises this family).
// feed_forward_length is present in the files but unused. Hugging Face checkpoints
// (Qwen3MoeForCausalLM) store each expert's projections separately ("mlp.experts.E.up_proj"); the
// checkpoint reader stacks them as GGUF does. Checkpoints whose layers are not all sparse
// (decoder_sparse_step, mlp_only_layers) or that do not renormalise (norm_topk_prob false) are
// refused: this family's forward pass runs neither.
// ref: Qwen3 technical report (arXiv:2505.09388) section 2; transformers modeling_qwen3_moe.py,
// configuration_qwen3_moe.py.
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
    TensorSpec{Role::AttnQNorm, "attn_q_norm.weight", true},
    TensorSpec{Role::AttnKNorm, "attn_k_norm.weight", true},
    TensorSpec{Role::AttnOutput, "attn_output.weight", true},
    TensorSpec{Role::FfnNorm, "ffn_norm.weight", true},
    TensorSpec{Role::FfnGateInp, "ffn_gate_inp.weight", true},
    TensorSpec{Role::FfnGateExps, "ffn_gate_exps.weight", true},
    TensorSpec{Role::FfnUpExps, "ffn_up_exps.weight", true},
    TensorSpec{Role::FfnDownExps, "ffn_down_exps.weight", true},
};

// Qwen 3's block with the FFN replaced by the router ("mlp.gate") and the experts.
constexpr HfNameRule kHfBlock[] = {
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"self_attn.o_proj", "attn_output"},
    {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate", "ffn_gate_inp"},
    {"mlp.experts.*.gate_proj", "ffn_gate_exps"},
    {"mlp.experts.*.up_proj", "ffn_up_exps"},
    {"mlp.experts.*.down_proj", "ffn_down_exps"},
};

constexpr std::array kHfTypes{
    HfModelType{"qwen3_moe", "Qwen3MoeForCausalLM", R"({
        "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24,
        "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "tie_word_embeddings": false, "use_sliding_window": false, "sliding_window": 4096,
        "decoder_sparse_step": 1, "moe_intermediate_size": 768, "num_experts_per_tok": 8, "num_experts": 128,
        "norm_topk_prob": false, "mlp_only_layers": []})"},
};

int64_t positive(const JsonFields& f, std::string_view key) {
    const auto v = f.opt_int(key);
    if (!v || *v <= 0) f.fail(key, "must be a positive integer");
    return *v;
}

void hf_quirks(const JsonFields& f, Hparams& hp) {
    // transformers 5 saves num_experts as num_local_experts (Qwen3MoeConfig.attribute_map)
    const std::string_view experts_key = f.has("num_local_experts") ? "num_local_experts" : "num_experts";
    hp.n_expert = positive(f, experts_key);
    hp.n_expert_used = positive(f, "num_experts_per_tok");
    if (hp.n_expert_used > hp.n_expert)
        f.fail("num_experts_per_tok", std::to_string(hp.n_expert_used) + " exceeds " + std::string(experts_key) + " " +
                                          std::to_string(hp.n_expert));
    hp.n_ff_exp = positive(f, "moe_intermediate_size");
    if (f.opt_int("decoder_sparse_step") != std::optional<int64_t>(1))
        f.fail("decoder_sparse_step",
               "deskside's qwen3moe runs a mixture of experts in every layer (decoder_sparse_step 1)");
    if (const nlohmann::json* dense = f.get("mlp_only_layers"); dense && !(dense->is_array() && dense->empty()))
        f.fail("mlp_only_layers", "deskside's qwen3moe runs a mixture of experts in every layer (no dense layers)");
    if (f.opt_bool("norm_topk_prob") != std::optional<bool>(true))
        f.fail("norm_topk_prob", "deskside's qwen3moe renormalises the top-k expert weights, as llama.cpp does (true)");
    if (f.opt_bool("use_sliding_window").value_or(false))
        f.fail("use_sliding_window", "sliding-window attention is not supported in qwen3moe checkpoints");
}

}  // namespace

const Family kQwen3MoeFamily{
    .name = "qwen3moe",
    .tensors = kTensors,
    .rope = RopeStyle::Neox,
    .hf_types = kHfTypes,
    .hf_block = kHfBlock,
    .hf_quirks = hf_quirks,
    .activation = FfnActivation::Silu,
    .attention_scale = inverse_sqrt_head_dim,
    .moe = true,
    .gating = ExpertGating::SoftmaxThenTopK,
    .normalize_expert_weights = true,
};

}  // namespace deskside::models
