// What differs between the architecture families the forward pass supports.
//
// The forward pass (engine/forward.cpp) is written once; each family (one small file:
// arch_llama.cpp, arch_qwen2.cpp, arch_gemma3.cpp) declares its tensors, with GGUF names, and
// the switches that make the shared pass compute that family's block. An architecture not listed
// here is rejected at load with its name.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "models/model.h"

namespace deskside::engine {

// Every tensor the forward pass may read. Per-layer ones are stored as "blk.<il>.<name>".
enum class Role {
    // model-wide
    TokenEmbd,   // [n_embd, n_vocab]
    OutputNorm,  // [n_embd]
    Output,      // [n_embd, n_vocab]; token_embd when tied
    RopeFreqs,   // [n_rot / 2] frequency divisors (Llama 3.1 files)
    // per layer
    AttnNorm,      // [n_embd]
    AttnQ,         // [n_embd, n_head * head_dim]
    AttnK,         // [n_embd, n_head_kv * head_dim]
    AttnV,         // [n_embd, n_head_kv * head_dim_v]
    AttnQBias,     // [n_head * head_dim]
    AttnKBias,     // [n_head_kv * head_dim]
    AttnVBias,     // [n_head_kv * head_dim_v]
    AttnQNorm,     // [head_dim]
    AttnKNorm,     // [head_dim]
    AttnOutput,    // [n_head * head_dim_v, n_embd]
    PostAttnNorm,  // [n_embd]
    FfnNorm,       // [n_embd]
    FfnGate,       // [n_embd, n_ff]
    FfnUp,         // [n_embd, n_ff]
    FfnDown,       // [n_ff, n_embd]
    PostFfnNorm,   // [n_embd]
    Count,
};
constexpr int kRoleCount = static_cast<int>(Role::Count);
constexpr bool is_layer_role(Role r) { return r >= Role::AttnNorm; }

struct TensorSpec {
    Role role;
    std::string_view name;  // GGUF name, without "blk.<il>." for per-layer tensors
    bool required;
};

enum class FfnActivation { Silu, GeluTanh };

struct ArchSpec {
    std::string_view name;  // general.architecture
    std::span<const TensorSpec> tensors;
    FfnActivation activation = FfnActivation::Silu;
    bool scale_embeddings = false;  // x = embedding * sqrt(n_embd) (Gemma)
    // The factor on q.k before softmax.
    float (*attention_scale)(const models::Hparams&) = nullptr;
    // Multiply q by that factor before the dot (Gemma's reference does), rather than the scores
    // after it; the two differ in rounding once q is stored in the K cache's type.
    bool prescale_queries = false;
    // Sliding-window layers use the file's rope base for local layers and no context scaling.
    bool swa_layers_unscaled_rope = false;
};

// 1 / sqrt(head_dim): the usual scaled dot-product attention. ref: "Attention Is All You Need".
float inverse_sqrt_head_dim(const models::Hparams& hp);

// The family of `architecture`; throws std::runtime_error naming it when unsupported.
const ArchSpec& arch_spec(const std::string& architecture);

extern const ArchSpec kLlamaArch;
extern const ArchSpec kQwen2Arch;
extern const ArchSpec kGemma3Arch;

}  // namespace deskside::engine
