#include "models/arch_names.h"

#include <limits>
#include <span>

#include "models/family.h"

namespace deskside::models {

namespace {

using NameRule = HfNameRule;

constexpr NameRule kGlobal[] = {
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"lm_head", "output"},
};

constexpr std::string_view kLayersPrefix = "model.layers.";

// Gemma3ForConditionalGeneration wraps the text model: transformers before 4.52 saved it as
// "language_model.model.*" / "language_model.lm_head.*", later versions as "model.language_model.*".
constexpr std::pair<std::string_view, std::string_view> kGemma3TextPrefixes[] = {
    {"language_model.model.", "model."},
    {"model.language_model.", "model."},
    {"language_model.lm_head.", "lm_head."},
};
constexpr std::string_view kGemma3VisionPrefixes[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                                      "model.multi_modal_projector."};

// The decimal number `s` spells (at most 9 digits), or -1.
int64_t decimal(std::string_view s) {
    if (s.empty() || s.size() > 9) return -1;
    int64_t n = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return -1;
        n = n * 10 + (c - '0');
    }
    return n;
}

// Whether `hf` is `pattern`, where a "*" in the pattern stands for a decimal number (put in `expert`).
bool matches(std::string_view pattern, std::string_view hf, int64_t& expert) {
    const size_t star = pattern.find('*');
    if (star == std::string_view::npos) return pattern == hf;
    const std::string_view head = pattern.substr(0, star), tail = pattern.substr(star + 1);
    if (hf.size() <= head.size() + tail.size() || !hf.starts_with(head) || !hf.ends_with(tail)) return false;
    expert = decimal(hf.substr(head.size(), hf.size() - head.size() - tail.size()));
    return expert >= 0;
}

const NameRule* find_rule(std::span<const NameRule> rules, std::string_view hf, int& index, int64_t& expert) {
    for (size_t i = 0; i < rules.size(); ++i) {
        if (matches(rules[i].hf, hf, expert)) {
            index = static_cast<int>(i);
            return &rules[i];
        }
    }
    return nullptr;
}

}  // namespace

HfTensorName map_hf_tensor_name(std::string_view architecture, std::string_view hf_name) {
    const Family* family = find_family(architecture);
    HfTensorName out;
    if (!family || family->hf_block.empty()) return out;
    bool multimodal = false;
    for (const HfModelType& t : family->hf_types) multimodal = multimodal || t.multimodal;

    std::string name(hf_name);
    if (multimodal) {
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
    std::string_view suffix = ".weight";
    int bias = 0;
    const auto strip = [&](std::string_view ending) {
        if (!base.ends_with(ending)) return false;
        base.remove_suffix(ending.size());
        return true;
    };
    bool plain = true;  // ".weight" / ".bias": names every family uses; the rest only in a block rule
    if (strip(".weight")) {
    } else if (strip(".bias")) {
        suffix = ".bias";
        bias = 1;
    } else if (strip("_bias")) {
        suffix = ".bias";
        bias = 1;
        plain = false;
    } else if (strip("_blocks")) {
        out.piece = HfTensorName::Piece::Mxfp4Blocks;
        plain = false;
    } else if (strip("_scales")) {
        out.piece = HfTensorName::Piece::Mxfp4Scales;
        plain = false;
    } else {
        plain = false;
    }

    int index = 0;
    if (base.starts_with(kLayersPrefix)) {
        base.remove_prefix(kLayersPrefix.size());
        const size_t dot = base.find('.');
        if (dot == std::string_view::npos) return out;
        const int64_t layer = decimal(base.substr(0, dot));
        if (layer < 0) return out;
        const NameRule* rule = find_rule(family->hf_block, base.substr(dot + 1), index, out.expert);
        if (!rule || (!plain && !rule->openai_names)) return HfTensorName{};
        out.kind = HfTensorName::Kind::Mapped;
        out.gguf = "blk." + std::to_string(layer) + "." + std::string(rule->gguf) + std::string(suffix);
        out.layer = layer;
        out.sort_key = {layer, 2 * index + bias};
        return out;
    }
    if (!plain) return HfTensorName{};
    int64_t no_expert = -1;
    const NameRule* rule = find_rule(kGlobal, base, index, no_expert);
    if (!rule) return out;
    out.kind = HfTensorName::Kind::Mapped;
    out.gguf = std::string(rule->gguf) + std::string(suffix);
    const int64_t group = index == 0 ? -1 : std::numeric_limits<int64_t>::max();  // embeddings first, head last
    out.sort_key = {group, 2 * index + bias};
    return out;
}

}  // namespace deskside::models
