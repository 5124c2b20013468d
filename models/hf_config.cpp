#include "models/hf_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>
#include <vector>

#include "models/family.h"
#include "models/hf_json.h"

namespace deskside::models {

namespace {

// The family and transformers model type a config names (model_type, or else architectures[0]).
struct Found {
    const Family* family;
    const HfModelType* type;
};

// Far above any real model; bounds the per-layer tables built from the config.
constexpr int64_t kMaxLayers = 4096;

Found find_hf_type(const JsonFields& root) {
    const auto model_type = root.opt_string("model_type");
    std::string arch_list;
    std::optional<std::string> first_class;
    if (const nlohmann::json* a = root.get("architectures")) {
        if (!a->is_array()) root.fail("architectures", "expected an array of class names, found " + a->dump());
        for (const auto& c : *a) {
            if (!c.is_string()) root.fail("architectures", "expected an array of class names, found " + a->dump());
            if (!first_class) first_class = c.get<std::string>();
            arch_list += (arch_list.empty() ? "" : ", ") + c.get<std::string>();
        }
    }
    std::string supported;
    for (const Family* f : all_families()) {
        for (const HfModelType& t : f->hf_types) {
            if (model_type ? *model_type == t.model_type : first_class == t.hf_class) return {f, &t};
            supported += (supported.empty() ? "" : ", ") + std::string(t.model_type);
        }
    }
    throw HfCheckpointError(root.file() + ": model_type '" + model_type.value_or("(none)") + "' (architectures: " +
                            (arch_list.empty() ? "(none)" : arch_list) + ") is not supported; deskside reads " +
                            supported + " checkpoints (convert other families to GGUF)");
}

int64_t positive_int(const JsonFields& f, std::string_view key, std::optional<int64_t> fallback = std::nullopt) {
    const auto v = f.opt_int(key);
    if (!v && !fallback) f.fail(key, "missing");
    const int64_t n = v.value_or(fallback.value_or(0));
    if (n <= 0) f.fail(key, "must be positive, found " + std::to_string(n));
    return n;
}

double positive_float(const JsonFields& f, std::string_view key, double fallback) {
    const double v = f.opt_float(key).value_or(fallback);
    if (!std::isfinite(v) || v <= 0) f.fail(key, "must be a positive number, found " + std::to_string(v));
    return v;
}

// One of LongRoPE's factor lists: n_rot / 2 positive numbers.
std::vector<float> rope_factor_list(const JsonFields& rope, std::string_view key, int64_t n) {
    const nlohmann::json* list = rope.get(key);
    if (!list || !list->is_array() || static_cast<int64_t>(list->size()) != n)
        rope.fail(key, "expected a list of " + std::to_string(n) + " numbers (head_dim / 2)");
    std::vector<float> out;
    for (const nlohmann::json& v : *list) {
        if (!v.is_number() || !(v.get<double>() > 0)) rope.fail(key, "expected positive numbers, found " + v.dump());
        out.push_back(v.get<float>());
    }
    return out;
}

// LongRoPE (Phi-3 "longrope", formerly "su"), as llama.cpp's converter writes it (Phi3MiniModel): the
// short and long frequency divisors become tensors, and cos and sin are multiplied by
// sqrt(1 + ln(s) / ln(original context)) with s = max_position_embeddings / original context.
// ref: Ding et al., "LongRoPE" (arXiv:2402.13753); transformers modeling_rope_utils.py (longrope).
void read_long_rope(const JsonFields& rope, const JsonFields& f, Hparams& hp, std::vector<HfConfigTensor>& tensors) {
    hp.rope_orig_ctx = rope.has("original_max_position_embeddings")
                           ? positive_int(rope, "original_max_position_embeddings")
                           : positive_int(f, "original_max_position_embeddings");
    const nlohmann::json* long_factor = rope.get("long_factor");
    if (!long_factor || (long_factor->is_array() && long_factor->empty())) return;  // the converter writes neither then
    const double scale = static_cast<double>(hp.n_ctx_train) / static_cast<double>(hp.rope_orig_ctx);
    hp.rope_attn_factor =
        scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(hp.rope_orig_ctx))) : 1.0;
    if (const auto stated = rope.opt_float("attention_factor");
        stated && std::abs(*stated - hp.rope_attn_factor) > 1e-6 * hp.rope_attn_factor)
        rope.fail("attention_factor", "differs from LongRoPE's own factor " + std::to_string(hp.rope_attn_factor) +
                                          ", which llama.cpp's converter writes; deskside does not run other values");
    tensors.push_back({"rope_factors_short.weight", rope_factor_list(rope, "short_factor", hp.n_rot / 2)});
    tensors.push_back({"rope_factors_long.weight", rope_factor_list(rope, "long_factor", hp.n_rot / 2)});
}

// The rope_scaling object (or transformers 5's rope_parameters) -> Hparams rope fields.
void read_rope_scaling(const JsonFields& rope, const JsonFields& f, const Family& family, Hparams& hp,
                       std::vector<HfConfigTensor>& tensors) {
    const std::string type = rope.opt_string("rope_type").value_or(rope.opt_string("type").value_or("default"));
    const std::string_view type_key = rope.has("rope_type") ? "rope_type" : "type";
    hp.rope_orig_ctx = hp.n_ctx_train;
    if (type == "default") return;
    if ((type == "longrope" || type == "su") && family.long_rope) return read_long_rope(rope, f, hp, tensors);
    if (type == "linear")
        hp.rope_scaling = RopeScaling::Linear;
    else if (type == "yarn")
        hp.rope_scaling = RopeScaling::Yarn;
    else if (type == "llama3")
        hp.rope_scaling = RopeScaling::Llama3;
    else
        rope.fail(type_key, "rope scaling '" + type + "' is not supported in a " + std::string(family.name) +
                                " model (deskside implements linear, yarn and llama3; longrope in phi3)");
    hp.rope_scaling_factor = positive_float(rope, "factor", 0);
    if (hp.rope_scaling == RopeScaling::Linear) return;
    hp.rope_orig_ctx =
        positive_int(rope, "original_max_position_embeddings",
                     hp.rope_scaling == RopeScaling::Yarn ? std::optional(hp.n_ctx_train) : std::nullopt);
    if (hp.rope_scaling == RopeScaling::Llama3) {
        hp.rope_llama3_low_freq_factor = positive_float(rope, "low_freq_factor", hp.rope_llama3_low_freq_factor);
        hp.rope_llama3_high_freq_factor = positive_float(rope, "high_freq_factor", hp.rope_llama3_high_freq_factor);
    }
}

void read_rope(const JsonFields& f, const Family& family, Hparams& hp, std::vector<HfConfigTensor>& tensors) {
    hp.rope_neox = true;  // HF keeps Q/K unpermuted and rotates halves (rotate_half) in every family
    hp.n_rot = hp.head_dim;
    if (const auto partial = f.opt_float("partial_rotary_factor"); partial && *partial != 1.0)
        f.fail("partial_rotary_factor", "partial rotary embeddings are not supported in this family");

    std::optional<JsonFields> global = f.opt_object("rope_scaling");
    std::optional<JsonFields> local;
    std::optional<JsonFields> params = f.opt_object("rope_parameters");
    if (params && params->has("full_attention")) {
        local = params->opt_object("sliding_attention");
        params = params->opt_object("full_attention");
    }
    if (!global) global = params;
    hp.rope_freq_base = positive_float(f, "rope_theta", 10000.0);
    if (params && params->has("rope_theta")) hp.rope_freq_base = positive_float(*params, "rope_theta", 0);
    hp.rope_orig_ctx = hp.n_ctx_train;
    if (global) read_rope_scaling(*global, f, family, hp, tensors);

    if (local && local->has("rope_theta")) hp.rope_freq_base_swa = positive_float(*local, "rope_theta", 0);
}

// Which layers use sliding-window attention: config.json's layer_types, or else the model type's rule.
std::vector<bool> sliding_layers(const JsonFields& f, const HfModelType& type, int64_t n_layer) {
    if (const nlohmann::json* types = f.get("layer_types")) {
        std::vector<bool> swa(static_cast<size_t>(n_layer), false);
        if (!types->is_array() || types->size() != swa.size())
            f.fail("layer_types", "expected an array of " + std::to_string(n_layer) + " layer types");
        for (size_t i = 0; i < swa.size(); ++i) {
            const auto& t = (*types)[i];
            if (t == "sliding_attention")
                swa[i] = true;
            else if (t != "full_attention")
                f.fail("layer_types", "entry " + std::to_string(i) + " is " + t.dump() +
                                          "; expected \"sliding_attention\" or \"full_attention\"");
        }
        return swa;
    }
    if (type.sliding_layers) return type.sliding_layers(f, n_layer);
    return std::vector<bool>(static_cast<size_t>(n_layer), false);
}

// Sliding layers as Hparams describe them: all layers, every Nth layer global (the pattern), or
// else one flag per layer (e.g. Qwen2's max_window_layers: the first layers global).
void read_sliding_window(const JsonFields& f, const HfModelType& type, Hparams& hp) {
    const std::vector<bool> swa = sliding_layers(f, type, hp.n_layer);
    const auto n_swa = std::count(swa.begin(), swa.end(), true);
    if (n_swa == 0) return;
    hp.sliding_window = positive_int(f, "sliding_window");
    if (n_swa == hp.n_layer) return;
    const int64_t pattern = (std::find(swa.begin(), swa.end(), false) - swa.begin()) + 1;
    for (int64_t i = 0; i < hp.n_layer; ++i) {
        if (swa[static_cast<size_t>(i)] != (i % pattern != pattern - 1)) {
            hp.swa_layers = swa;
            return;
        }
    }
    hp.sliding_window_pattern = pattern;
}

std::optional<int64_t> token_id(const JsonFields& text, const JsonFields& root, std::string_view key) {
    for (const JsonFields* f : {&text, &root}) {
        const nlohmann::json* v = f->get(key);
        if (!v) continue;
        if (v->is_array()) {  // eos_token_id: [1, 106]; the first is the end-of-text token
            if (v->empty()) continue;
            if (!(*v)[0].is_number_integer()) f->fail(key, "expected integer token ids, found " + v->dump());
            return (*v)[0].get<int64_t>();
        }
        return f->opt_int(key);
    }
    return std::nullopt;
}

}  // namespace

HfConfig parse_hf_config(const nlohmann::json& config, const std::string& path) {
    const JsonFields root(config, path);
    const auto [family, type] = find_hf_type(root);
    HfConfig out;
    out.model_type = std::string(type->model_type);
    out.multimodal = type->multimodal;

    // The text model's fields over the family defaults; a key the config sets to null stays
    // null (Python's None: "no sliding window", "head_dim from hidden_size").
    nlohmann::json text = nlohmann::json::parse(type->defaults);
    std::string prefix;
    if (out.multimodal) {
        prefix = "text_config";
        if (const auto tc = root.opt_object("text_config")) {
            for (const auto& [k, v] : config.at("text_config").items()) text[k] = v;
        }
    } else {
        for (const auto& [k, v] : config.items()) text[k] = v;
    }
    const JsonFields f(text, path, prefix);

    Hparams& hp = out.hparams;
    hp.architecture = std::string(family->name);
    hp.n_layer = positive_int(f, "num_hidden_layers");
    if (hp.n_layer > kMaxLayers)
        f.fail("num_hidden_layers", std::to_string(hp.n_layer) + " exceeds the limit of " + std::to_string(kMaxLayers));
    hp.n_embd = positive_int(f, "hidden_size");
    hp.n_head = positive_int(f, "num_attention_heads");
    hp.n_head_kv = positive_int(f, "num_key_value_heads", hp.n_head);
    if (hp.n_head % hp.n_head_kv != 0)
        f.fail("num_key_value_heads",
               std::to_string(hp.n_head_kv) + " does not divide num_attention_heads " + std::to_string(hp.n_head));
    if (!f.has("head_dim") && hp.n_embd % hp.n_head != 0)
        f.fail("hidden_size",
               std::to_string(hp.n_embd) + " is not a multiple of num_attention_heads " + std::to_string(hp.n_head));
    hp.head_dim = positive_int(f, "head_dim", hp.n_embd / hp.n_head);
    hp.head_dim_v = hp.head_dim;
    hp.n_ff = positive_int(f, "intermediate_size");
    hp.n_ctx_train = positive_int(f, "max_position_embeddings");
    hp.n_vocab = positive_int(f, "vocab_size");
    hp.norm_eps = positive_float(f, "rms_norm_eps", 1e-6);
    read_rope(f, *family, hp, out.config_tensors);
    read_sliding_window(f, *type, hp);
    if (family->hf_quirks) family->hf_quirks(f, hp);

    out.tie_word_embeddings =
        root.opt_bool("tie_word_embeddings").value_or(f.opt_bool("tie_word_embeddings").value_or(false));
    out.bos_token_id = token_id(f, root, "bos_token_id");
    out.eos_token_id = token_id(f, root, "eos_token_id");
    out.pad_token_id = token_id(f, root, "pad_token_id");
    out.stated = config;
    if (const nlohmann::json* tc = root.get("text_config"); tc && tc->is_object()) {
        for (const auto& [k, v] : tc->items()) out.stated[k] = v;
    }
    return out;
}

}  // namespace deskside::models
