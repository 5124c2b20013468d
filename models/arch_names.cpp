#include "models/arch_names.h"

#include <limits>
#include <span>

namespace deskside::models {

namespace {

struct NameRule {
    std::string_view hf;    // without ".weight" / ".bias"
    std::string_view gguf;  // likewise
};

// Below "model.layers.N.", in the order GGUF files list a block's tensors.
// ref: llama.cpp gguf-py/gguf/tensor_mapping.py (the GGUF names), transformers modeling_llama.py,
// modeling_qwen2.py, modeling_gemma3.py (the module names).
constexpr NameRule kLlamaBlock[] = {
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

// Gemma 3 norms both sides of attention and of the FFN, and normalizes Q and K per head.
constexpr NameRule kGemma3Block[] = {
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

constexpr NameRule kGlobal[] = {
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"lm_head", "output"},
};

struct ArchTable {
    std::string_view architecture;
    std::span<const NameRule> block;
    bool multimodal_gemma3;  // accepts Gemma3ForConditionalGeneration's prefixes
};

constexpr ArchTable kTables[] = {
    {"llama", kLlamaBlock, false},
    {"qwen2", kLlamaBlock, false},
    {"gemma3", kGemma3Block, true},
};

constexpr std::string_view kLayersPrefix = "model.layers.";

// Gemma3ForConditionalGeneration wraps the text model: transformers before 4.52 saved it as
// "language_model.model.*" / "language_model.lm_head.*", later versions as "model.language_model.*".
constexpr std::pair<std::string_view, std::string_view> kGemma3TextPrefixes[] = {
    {"language_model.model.", "model."},
    {"model.language_model.", "model."},
    {"language_model.lm_head.", "lm_head."},
};
constexpr std::string_view kGemma3VisionPrefixes[] = {
    "vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."};

const NameRule* find_rule(std::span<const NameRule> rules, std::string_view hf, int& index) {
    for (size_t i = 0; i < rules.size(); ++i) {
        if (rules[i].hf == hf) {
            index = static_cast<int>(i);
            return &rules[i];
        }
    }
    return nullptr;
}

}  // namespace

HfTensorName map_hf_tensor_name(std::string_view architecture, std::string_view hf_name) {
    const ArchTable* table = nullptr;
    for (const ArchTable& t : kTables) {
        if (t.architecture == architecture) table = &t;
    }
    HfTensorName out;
    if (!table) return out;

    std::string name(hf_name);
    if (table->multimodal_gemma3) {
        for (std::string_view p : kGemma3VisionPrefixes) {
            if (name.starts_with(p)) {
                out.kind = HfTensorName::Kind::Ignored;
                return out;
            }
        }
        for (const auto& [from, to] : kGemma3TextPrefixes) {
            if (name.starts_with(from)) {
                name = std::string(to) + name.substr(from.size());
                break;
            }
        }
    }
    // Older checkpoints saved RoPE's inverse frequencies; they follow from rope_theta.
    if (name.ends_with(".rotary_emb.inv_freq")) {
        out.kind = HfTensorName::Kind::Ignored;
        return out;
    }

    std::string_view base(name);
    std::string_view suffix;
    int bias = 0;
    if (base.ends_with(".weight")) {
        suffix = ".weight";
    } else if (base.ends_with(".bias")) {
        suffix = ".bias";
        bias = 1;
    } else {
        return out;
    }
    base.remove_suffix(suffix.size());

    int index = 0;
    if (base.starts_with(kLayersPrefix)) {
        base.remove_prefix(kLayersPrefix.size());
        const size_t dot = base.find('.');
        if (dot == 0 || dot == std::string_view::npos || dot > 9) return out;
        int64_t layer = 0;
        for (char c : base.substr(0, dot)) {
            if (c < '0' || c > '9') return out;
            layer = layer * 10 + (c - '0');
        }
        const NameRule* rule = find_rule(table->block, base.substr(dot + 1), index);
        if (!rule) return out;
        out.kind = HfTensorName::Kind::Mapped;
        out.gguf = "blk." + std::to_string(layer) + "." + std::string(rule->gguf) + std::string(suffix);
        out.layer = layer;
        out.sort_key = {layer, 2 * index + bias};
        return out;
    }
    const NameRule* rule = find_rule(kGlobal, base, index);
    if (!rule) return out;
    out.kind = HfTensorName::Kind::Mapped;
    out.gguf = std::string(rule->gguf) + std::string(suffix);
    const int64_t group = index == 0 ? -1 : std::numeric_limits<int64_t>::max();  // embeddings first, head last
    out.sort_key = {group, 2 * index + bias};
    return out;
}

}  // namespace deskside::models
