// Everything deskside knows about one architecture family, in one place per family.
//
// A family file (models/family_<name>.cpp) states, for its GGUF `general.architecture`:
//   - the tensors the forward pass reads, by role, with their GGUF names;
//   - the RoPE style, stated (never inferred from the architecture's name);
//   - hyper-parameter quirks of its GGUF files (values llama.cpp fills in that the file omits);
//   - the Hugging Face side, where deskside reads such checkpoints: the transformers model types,
//     their config.json defaults and quirks, and the names of a block's modules;
//   - the switches that make the one forward pass (engine/forward.cpp) compute the family's block:
//     fused QKV, fused gate+up, mixture of experts, LongRoPE, activation, scales, norms.
// Adding a dense family that reuses existing ops is one such file, one line in family.cpp's list,
// and its test.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"

namespace deskside::models {

class JsonFields;

// Every tensor the forward pass may read. Per-layer ones are stored as "blk.<il>.<name>".
enum class Role {
    // model-wide
    TokenEmbd,         // [n_embd, n_vocab]
    OutputNorm,        // [n_embd]
    Output,            // [n_embd, n_vocab]; token_embd when tied
    RopeFreqs,         // [n_rot / 2] frequency divisors (Llama 3.1 files)
    RopeFactorsShort,  // [n_rot / 2] LongRoPE divisors for contexts up to rope_orig_ctx (Phi-3)
    RopeFactorsLong,   // [n_rot / 2] LongRoPE divisors beyond it
    // per layer
    AttnNorm,        // [n_embd]
    AttnQkv,         // [n_embd, q + k + v rows]: fused, split into AttnQ/K/V rows at load
    AttnQ,           // [n_embd, n_head * head_dim]
    AttnK,           // [n_embd, n_head_kv * head_dim]
    AttnV,           // [n_embd, n_head_kv * head_dim_v]
    AttnQBias,       // [n_head * head_dim]
    AttnKBias,       // [n_head_kv * head_dim]
    AttnVBias,       // [n_head_kv * head_dim_v]
    AttnQNorm,       // [head_dim]
    AttnKNorm,       // [head_dim]
    AttnOutput,      // [n_head * head_dim_v, n_embd]
    AttnOutputBias,  // [n_embd]
    AttnSinks,       // [n_head] one sink logit per head (gpt-oss)
    PostAttnNorm,    // [n_embd]
    FfnNorm,         // [n_embd]
    FfnGateUp,       // [n_embd, 2 * n_ff]: fused, first n_ff rows gate, then up (Phi-3); split at load
    FfnGate,         // [n_embd, n_ff]
    FfnUp,           // [n_embd, n_ff]
    FfnDown,         // [n_ff, n_embd]
    FfnGateInp,      // [n_embd, n_expert] router
    FfnGateInpBias,  // [n_expert]
    FfnGateExps,     // [n_embd, n_ff_exp, n_expert] stacked experts
    FfnUpExps,       // [n_embd, n_ff_exp, n_expert]
    FfnDownExps,     // [n_ff_exp, n_embd, n_expert]
    FfnGateExpsBias, // [n_ff_exp, n_expert]
    FfnUpExpsBias,   // [n_ff_exp, n_expert]
    FfnDownExpsBias, // [n_embd, n_expert]
    PostFfnNorm,     // [n_embd]
    Count,
};
constexpr int kRoleCount = static_cast<int>(Role::Count);
constexpr bool is_layer_role(Role r) { return r >= Role::AttnNorm; }
// The mixture-of-experts block's tensors (router and experts): they live together on the layer's
// device, or all in host memory with --cpu-moe.
constexpr bool is_expert_role(Role r) { return r >= Role::FfnGateInp && r <= Role::FfnDownExpsBias; }
// Tensors the element-wise ops read as F32 (norms, biases, sinks), converted at load when stored otherwise.
constexpr bool is_vector_role(Role r) {
    switch (r) {
        case Role::OutputNorm: case Role::AttnNorm: case Role::AttnQBias: case Role::AttnKBias: case Role::AttnVBias:
        case Role::AttnQNorm: case Role::AttnKNorm: case Role::AttnOutputBias: case Role::AttnSinks: case Role::PostAttnNorm:
        case Role::FfnNorm: case Role::FfnGateInpBias: case Role::FfnGateExpsBias: case Role::FfnUpExpsBias:
        case Role::FfnDownExpsBias: case Role::PostFfnNorm: return true;
        default: return false;
    }
}
// Tensors kept as host floats for RoPE's angles, never placed on a device.
constexpr bool is_host_role(Role r) { return r == Role::RopeFreqs || r == Role::RopeFactorsShort || r == Role::RopeFactorsLong; }

struct TensorSpec {
    Role role;
    std::string_view name;  // GGUF name, without "blk.<il>." for per-layer tensors
    bool required;
};

// The shape a role's tensor must have in a file of these hyper-parameters (ggml order, contiguous
// first); empty for Count.
std::vector<int64_t> expected_shape(Role r, const Hparams& hp);

// How RoPE pairs a head's dimensions (llama.cpp's LLAMA_ROPE_TYPE_NORM / _NEOX). GGUF llama files
// store Q and K permuted so that adjacent pairs rotate; most other families rotate halves.
enum class RopeStyle { AdjacentPairs, Neox };

enum class FfnActivation {
    Silu,       // SwiGLU: silu(gate) * up
    GeluTanh,   // GeGLU with tanh-approximated GELU (Gemma)
    SwigluOai,  // gpt-oss's clamped SwiGLU (alpha 1.702, limit 7)
};

// How a mixture-of-experts router's logits become weights (backends::MoeGating).
enum class ExpertGating { SoftmaxThenTopK, TopKThenSoftmax };

// One transformers model type a family reads from Hugging Face checkpoints.
struct HfModelType {
    std::string_view model_type;  // config.json "model_type"
    std::string_view hf_class;    // architectures[0]
    std::string_view defaults;    // the config class's constructor defaults for the fields read (JSON)
    // Which layers use sliding-window attention when config.json has no layer_types (nullptr: none).
    std::vector<bool> (*sliding_layers)(const JsonFields& config, int64_t n_layer) = nullptr;
    bool multimodal = false;  // text weights sit under a prefix, vision weights beside them (Gemma 3)
};

// A Hugging Face module name below "model.layers.N." and its GGUF name (without .weight/.bias).
struct HfNameRule {
    std::string_view hf;
    std::string_view gguf;
    // The module's tensors may also be named as OpenAI's gpt-oss checkpoints name them: "<hf>_bias",
    // "<hf>_blocks" / "<hf>_scales" (MXFP4), or "<hf>" alone (a parameter without ".weight").
    bool openai_names = false;
};

struct Family {
    std::string_view name;  // general.architecture
    std::span<const TensorSpec> tensors;
    RopeStyle rope = RopeStyle::Neox;

    // GGUF: fills what the family's files leave to llama.cpp's defaults (called after the keys
    // every family shares are read).
    void (*gguf_quirks)(Hparams&) = nullptr;

    // Hugging Face checkpoints (empty when deskside reads none of this family).
    std::span<const HfModelType> hf_types;
    std::span<const HfNameRule> hf_block;  // in the order GGUF files list a block's tensors
    // Fields of the family's config.json beyond the shared ones (nullptr: none).
    void (*hf_quirks)(const JsonFields& config, Hparams& hp) = nullptr;

    // ---- the forward pass's switches ----
    FfnActivation activation = FfnActivation::Silu;
    bool scale_embeddings = false;  // x = embedding * sqrt(n_embd) (Gemma)
    // The factor on q.k before softmax.
    float (*attention_scale)(const Hparams&) = nullptr;
    // Multiply q by that factor before the dot (Gemma's reference does), rather than the scores
    // after it; the two differ in rounding once q is stored in the K cache's type.
    bool prescale_queries = false;
    // Sliding-window layers use the file's rope base for local layers and no context scaling.
    bool swa_layers_unscaled_rope = false;
    bool fused_qkv = false;      // AttnQkv instead of AttnQ/K/V
    bool fused_gate_up = false;  // FfnGateUp instead of FfnGate/FfnUp
    bool moe = false;            // every layer's FFN is a mixture of experts (Ffn*Exps, FfnGateInp)
    ExpertGating gating = ExpertGating::SoftmaxThenTopK;
    bool normalize_expert_weights = false;  // SoftmaxThenTopK: the chosen weights divided by their sum
    bool long_rope = false;  // RopeFactorsShort/Long chosen by context length, times rope_attn_factor
};

// 1 / sqrt(head_dim): the usual scaled dot-product attention. ref: "Attention Is All You Need".
float inverse_sqrt_head_dim(const Hparams& hp);

// The family of a GGUF architecture name, or nullptr.
const Family* find_family(std::string_view architecture);
// Same, throwing std::runtime_error naming the architecture and listing the supported ones.
const Family& family(std::string_view architecture);
// Every family, in the order family.cpp lists them.
std::span<const Family* const> all_families();
// "llama, qwen2, ..." for messages.
std::string family_names();

// Llama's block names below "model.layers.N." (transformers' LlamaDecoderLayer), shared by the
// families whose block is Llama's.
extern const std::span<const HfNameRule> kLlamaHfBlock;

// Qwen 2 / 3's sliding layers: with use_sliding_window, layers from max_window_layers on.
std::vector<bool> qwen_sliding_layers(const JsonFields& config, int64_t n_layer);

extern const Family kLlamaFamily;
extern const Family kQwen2Family;
extern const Family kQwen3Family;
extern const Family kQwen3MoeFamily;
extern const Family kPhi3Family;
extern const Family kGemma3Family;
extern const Family kGptOssFamily;

}  // namespace deskside::models
