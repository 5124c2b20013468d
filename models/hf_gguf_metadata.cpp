// What convert_hf_to_gguf.py writes, step by step in its order (ModelBase.prepare_metadata):
// general.architecture and general.type; gguf-py's Metadata (generation_config.json's sampling
// fields, the name, the size label); TextModel.set_gguf_parameters and the family's additions;
// then the vocabulary (_set_vocab_sentencepiece and gguf-py's SpecialVocab). The converter writes a
// hyper-parameter only where config.json states it, so this reads HfConfig::stated, not the
// family defaults HfConfig::hparams is filled with. A key written twice keeps its first place and
// takes the later value, as gguf-py's GGUFWriter does.
// ref: llama.cpp conversion/base.py, llama.py, qwen.py, gemma.py; gguf-py gguf/metadata.py, vocab.py.
#include "models/hf_gguf_metadata.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <regex>
#include <sstream>

#include "models/hf_bpe_vocab.h"
#include "models/hf_checkpoint.h"
#include "models/hf_config.h"
#include "models/hf_json.h"
#include "models/hf_tokenizer_facts.h"

namespace deskside::models {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class KvList {
   public:
    void set(const std::string& key, GgufValue v) {
        for (auto& [k, old] : kv_) {
            if (k == key) {
                old = std::move(v);
                return;
            }
        }
        kv_.emplace_back(key, std::move(v));
    }
    std::vector<std::pair<std::string, GgufValue>> take() { return std::move(kv_); }

   private:
    std::vector<std::pair<std::string, GgufValue>> kv_;
};

GgufValue u32(int64_t v) {
    return GgufValue::u32(static_cast<uint32_t>(v));
}
GgufValue f32(double v) {
    return GgufValue::f32(static_cast<float>(v));
}

// gguf-py's Metadata.id_to_title: words title-cased unless they hold capitals or are versions/numbers.
std::string id_to_title(const std::string& id) {
    std::istringstream words([&] {
        std::string s = id;
        for (char& c : s) c = c == '-' ? ' ' : c;
        return s;
    }());
    std::string out, w;
    while (words >> w) {
        bool cased = false, lower = true;
        for (unsigned char c : w) {
            if (std::isalpha(c)) cased = true;
            if (std::isupper(c)) lower = false;
        }
        const bool version = (w.size() > 1 && w[0] == 'v' && std::isdigit(static_cast<unsigned char>(w[1]))) ||
                             std::isdigit(static_cast<unsigned char>(w[0]));
        if (cased && lower && !version) {
            bool after_letter = false;
            for (char& c : w) {
                const auto u = static_cast<unsigned char>(c);
                if (std::isalpha(u)) c = static_cast<char>(after_letter ? std::tolower(u) : std::toupper(u));
                after_letter = std::isalpha(u) != 0;
            }
        }
        out += (out.empty() ? "" : " ") + w;
    }
    return out;
}

// gguf-py's model_weight_count_rounded_notation(n, min_digits=2): "3.4M", "260K", "7.2B".
std::string size_label(int64_t n) {
    const double x = static_cast<double>(n);
    const auto [scaled, suffix] = x > 1e12  ? std::pair{x * 1e-12, "T"}
                                  : x > 1e9 ? std::pair{x * 1e-9, "B"}
                                  : x > 1e6 ? std::pair{x * 1e-6, "M"}
                                            : std::pair{x * 1e-3, "K"};
    const std::string whole = std::to_string(static_cast<int64_t>(std::nearbyint(scaled)));
    const size_t digits =
        whole.find_first_not_of('0') == std::string::npos ? 0 : whole.size() - whole.find_first_not_of('0');
    const int fix = std::max(2 - static_cast<int>(digits), 0);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f%s", fix, scaled, suffix);
    return buf;
}

// What gguf-py's Metadata.get_model_id_components reads from a model id ("Llama-3.1-8B-Instruct"):
// the basename, finetune, version and size label, by the same annotations of the '-'-separated parts.
struct NameComponents {
    std::optional<std::string> basename, finetune, version, size_label;
};

NameComponents name_components(const std::string& id, int64_t total_params) {
    NameComponents out;
    if (id.find(' ') != std::string::npos) return out;  // a sentence: the name only
    enum : unsigned { kBase = 1, kSize = 2, kFinetune = 4, kVersion = 8, kType = 16 };
    std::vector<std::string> parts;
    for (size_t begin = 0; begin <= id.size();) {
        const size_t end = std::min(id.find('-', begin), id.size());
        if (end > begin) parts.push_back(id.substr(begin, end - begin));
        begin = end + 1;
    }
    static const std::regex version(R"((v|iter)?\d+([.]\d+)*)", std::regex::icase);
    static const std::regex quant_type(R"(i?q\d(_\w)*|b?fp?(16|32))", std::regex::icase);
    static const std::regex size(R"((([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl))",
                                 std::regex::icase);
    static const std::regex finetune(R"(chat|instruct|vision|lora)", std::regex::icase);
    const auto is_digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
    std::vector<unsigned> types(parts.size(), 0);
    for (size_t i = 0; i < parts.size(); ++i) {
        std::string& part = parts[i];
        if (std::regex_match(part, version)) {
            types[i] |= kVersion;
        } else if (std::regex_match(part, quant_type)) {
            types[i] |= kType;
            for (char& c : part) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        } else if (i > 0 && std::regex_match(part, size)) {
            for (char& c : part) c = c == '_' ? '.' : c;
            if (is_digit(part.back()))  // bloom-7b1 -> 7.1b
                part = part.substr(0, part.size() - 2) + "." + part.back() + part[part.size() - 2];
            if (part.size() > 1 && is_digit(part[part.size() - 2]) &&
                std::string_view("kmbt").find(part.back()) != std::string_view::npos)
                part.back() = static_cast<char>(std::toupper(static_cast<unsigned char>(part.back())));
            if (total_params != 0) {
                const std::string number = part.substr(0, part.size() - 1);
                char* end = nullptr;
                const double value = std::strtod(number.c_str(), &end);
                if (!number.empty() && end == number.c_str() + number.size()) {
                    const double label =
                        value * std::pow(1000.0, static_cast<double>(std::string_view(" KMBT").find(part.back())));
                    const bool off = total_params < 0 ? label < static_cast<double>(-total_params / 8)
                                                      : std::abs(label - static_cast<double>(total_params)) >
                                                            static_cast<double>(7 * total_params / 8);
                    if (off) {  // most likely a context length
                        types[i] |= kFinetune;
                        part.back() = static_cast<char>(std::tolower(static_cast<unsigned char>(part.back())));
                    }
                }
            }
            if (types[i] == 0) types[i] |= kSize;
        } else if (i > 0 && std::regex_match(part, finetune)) {
            types[i] |= kFinetune;
        }
    }
    // Word sizes ("small") give way to a numeric one.
    bool numeric_size = false;
    for (size_t i = 0; i < parts.size(); ++i)
        if ((types[i] & kSize) && std::any_of(parts[i].begin(), parts[i].end(), is_digit)) numeric_size = true;
    for (size_t i = 0; i < parts.size() && numeric_size; ++i) {
        const bool alpha = std::all_of(parts[i].begin(), parts[i].end(),
                                       [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
        if ((types[i] & kSize) && alpha) types[i] &= ~kSize;
    }
    bool at_start = true;
    for (size_t i = 0; i < parts.size(); ++i) {
        if (at_start &&
            ((types[i] == 0 && std::isalpha(static_cast<unsigned char>(parts[i][0]))) || (types[i] & kVersion))) {
            types[i] |= kBase;
        } else {
            at_start = false;
            if (types[i] == 0) types[i] |= kFinetune;
        }
    }
    for (size_t i = parts.size(); i-- > 0;) {  // a trailing version is not part of the basename
        if ((types[i] & kBase) && types[i] != kBase)
            types[i] &= ~kBase;
        else
            break;
    }
    const auto join = [&](unsigned want, unsigned exclude) -> std::optional<std::string> {
        std::string joined;
        std::vector<std::string> seen;
        for (size_t i = 0; i < parts.size(); ++i) {
            if (!(types[i] & want) || (types[i] & exclude)) continue;
            if (want == kSize && std::find(seen.begin(), seen.end(), parts[i]) != seen.end()) continue;
            seen.push_back(parts[i]);
            joined += (joined.empty() ? "" : "-") + parts[i];
        }
        return joined.empty() ? std::nullopt : std::optional(joined);
    };
    out.size_label = join(kSize, 0);
    out.finetune = join(kFinetune, 0);
    out.version = join(kVersion, kBase);
    if (out.size_label || out.finetune || out.version) out.basename = join(kBase, 0);
    return out;
}

std::string dir_name(const std::string& dir) {
    fs::path p = fs::path(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    if (p.filename() == "." || p.filename() == "..") p = fs::absolute(p).lexically_normal();
    return p.filename().string();
}

// generation_config.json's field -> general.sampling.NAME, in set_gguf_meta_model's order.
struct SamplingKey {
    const char* field;
    const char* alt_field;  // read when `field` is absent
    const char* name;
    bool integer;
};
constexpr SamplingKey kSamplingKeys[] = {
    {"top_k", nullptr, "top_k", true},
    {"top_p", nullptr, "top_p", false},
    {"min_p", nullptr, "min_p", false},
    {"xtc_probability", nullptr, "xtc_probability", false},
    {"xtc_threshold", nullptr, "xtc_threshold", false},
    {"temperature", nullptr, "temp", false},
    {"penalty_last_n", nullptr, "penalty_last_n", true},
    {"penalty_repeat", "repetition_penalty", "penalty_repeat", false},
    {"mirostat", nullptr, "mirostat", true},
    {"mirostat_tau", nullptr, "mirostat_tau", false},
    {"mirostat_eta", nullptr, "mirostat_eta", false},
};

// gguf-py's Metadata: sampling defaults from generation_config.json; the name, and the parts its
// heuristics find in it, from the directory (a checkpoint without a README.md model card).
void general_metadata(KvList& kv, const std::string& dir, int64_t n_params, const std::string& counted_label) {
    const fs::path gen_path = fs::path(dir) / "generation_config.json";
    if (fs::is_regular_file(gen_path)) {
        const json gen = read_json_file(gen_path.string());
        const JsonFields g(gen, gen_path.string());
        if (auto v = g.opt_string("sequence")) kv.set("general.sampling.sequence", GgufValue::string(*v));
        for (const SamplingKey& k : kSamplingKeys) {
            const char* field = g.has(k.field) || !k.alt_field ? k.field : k.alt_field;
            const std::string name = std::string("general.sampling.") + k.name;
            if (k.integer) {
                if (auto v = g.opt_int(field)) kv.set(name, GgufValue::i32(static_cast<int32_t>(*v)));
            } else if (auto v = g.opt_float(field)) {
                kv.set(name, f32(*v));
            }
        }
    }
    const std::string id = dir_name(dir);
    const NameComponents c = name_components(id, n_params);
    kv.set("general.name", GgufValue::string(id_to_title(id)));
    if (c.version) kv.set("general.version", GgufValue::string(*c.version));
    if (c.finetune) kv.set("general.finetune", GgufValue::string(*c.finetune));
    if (c.basename) kv.set("general.basename", GgufValue::string(*c.basename));
    if (c.size_label)
        kv.set("general.size_label", GgufValue::string(*c.size_label));
    else if (n_params > 0)
        kv.set("general.size_label", GgufValue::string(counted_label));
}

// gguf-py's size_label from GGUFWriter.get_total_parameter_count: the parameter count, or for a
// mixture of experts "<experts>x<shared parameters + one expert's>".
std::string counted_size_label(const ModelInfo& m) {
    int64_t total = 0, shared = 0, per_expert = 0, expert_sum = 0, n_expert_tensors = 0;
    for (const Tensor& t : m.tensors) {
        const int64_t n = t.n_elements();
        total += n;
        if (t.name.find("_exps.") != std::string::npos && t.shape.size() >= 3) {
            per_expert += n / t.shape[2];
            expert_sum += t.shape[2];
            ++n_expert_tensors;
        } else {
            shared += n;
        }
    }
    if (n_expert_tensors == 0) return size_label(total);
    return std::to_string(expert_sum / n_expert_tensors) + "x" + size_label(shared + per_expert);
}

// TextModel.__init__'s rope_parameters: rope_parameters or rope_scaling, with rope_theta and the
// local base mirrored in.
struct RopeParams {
    std::optional<std::string> type;
    std::optional<double> factor, theta, theta_swa;
    std::optional<int64_t> orig_ctx;
    std::optional<double> yarn_ext, yarn_attn, beta_fast, beta_slow;
};

RopeParams rope_params(const JsonFields& f) {
    RopeParams r;
    std::optional<JsonFields> rp = f.opt_object("rope_parameters");
    if (!rp) rp = f.opt_object("rope_scaling");
    std::optional<JsonFields> full;
    if (rp && rp->has("full_attention")) full = rp->opt_object("full_attention");
    const JsonFields* g = full ? &*full : (rp ? &*rp : nullptr);
    if (g) {
        r.type = g->opt_string("rope_type");
        if (!r.type) r.type = g->opt_string("type");
        r.factor = g->opt_float("factor");
        r.theta = g->opt_float("rope_theta");
        r.orig_ctx = g->opt_int("original_max_position_embeddings");
        r.yarn_ext = g->opt_float("extrapolation_factor");
        r.yarn_attn = g->has("attention_factor") ? g->opt_float("attention_factor") : g->opt_float("attn_factor");
        r.beta_fast = g->opt_float("beta_fast");
        r.beta_slow = g->opt_float("beta_slow");
    }
    const bool split = rp && (rp->has("full_attention") || rp->has("sliding_attention"));
    if (split) {
        if (const auto s = rp->opt_object("sliding_attention")) r.theta_swa = s->opt_float("rope_theta");
        return r;
    }
    for (const char* k :
         {"local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta", "rope_local_base_freq"}) {
        if (!r.theta_swa) r.theta_swa = f.opt_float(k);
    }
    if (!r.theta) {
        for (const char* k :
             {"global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"}) {
            if (!r.theta) r.theta = f.opt_float(k);
        }
    }
    if (!r.orig_ctx) r.orig_ctx = f.opt_int("original_max_position_embeddings");
    return r;
}

// Phi3MiniModel.set_gguf_parameters, which replaces TextModel's: every key from the config class's
// values (hparams holds them, defaults filled in), in its order.
void phi3_metadata(KvList& kv, const HfConfig& cfg, const JsonFields& f) {
    const Hparams& hp = cfg.hparams;
    const auto key = [&](const char* k) { return hp.architecture + "." + k; };
    kv.set(key("context_length"), u32(hp.n_ctx_train));
    kv.set(key("rope.scaling.original_context_length"),
           u32(rope_params(f).orig_ctx.value_or(4096)));  // Phi3Config's default
    kv.set(key("embedding_length"), u32(hp.n_embd));
    kv.set(key("feed_forward_length"), u32(hp.n_ff));
    kv.set(key("block_count"), u32(hp.n_layer));
    kv.set(key("attention.head_count"), u32(hp.n_head));
    kv.set(key("attention.head_count_kv"), u32(hp.n_head_kv));
    kv.set(key("attention.layer_norm_rms_epsilon"), f32(hp.norm_eps));
    kv.set(key("rope.dimension_count"), u32(hp.n_rot));
    kv.set(key("rope.freq_base"), f32(hp.rope_freq_base));
    kv.set(key("attention.sliding_window"), u32(hp.sliding_window));
}

// TextModel.set_gguf_parameters, then the family's set_gguf_parameters.
void architecture_metadata(KvList& kv, const HfConfig& cfg, const std::string& path) {
    const JsonFields f(cfg.stated, path);
    const std::string& arch = cfg.hparams.architecture;
    if (arch == "phi3") return phi3_metadata(kv, cfg, f);
    const auto key = [&](const char* k) { return arch + "." + k; };
    const auto first_int = [&](std::initializer_list<const char*> keys) -> std::optional<int64_t> {
        for (const char* k : keys)
            if (auto v = f.opt_int(k)) return v;
        return std::nullopt;
    };

    kv.set(key("block_count"), u32(cfg.hparams.n_layer));
    if (auto v = first_int({"max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length",
                            "model_max_length"}))
        kv.set(key("context_length"), u32(*v));
    if (auto v = first_int({"hidden_size", "n_embd", "dim"})) kv.set(key("embedding_length"), u32(*v));
    if (auto v = first_int({"prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner",
                            "hidden_dim"}))
        kv.set(key("feed_forward_length"), u32(*v));
    if (auto v = first_int({"num_attention_heads", "n_head", "n_heads"})) kv.set(key("attention.head_count"), u32(*v));
    if (auto v = first_int({"num_key_value_heads", "n_kv_heads"})) kv.set(key("attention.head_count_kv"), u32(*v));

    const RopeParams rope = rope_params(f);
    if (rope.type && rope.factor && (*rope.type == "linear" || *rope.type == "yarn")) {
        kv.set(key("rope.scaling.type"), GgufValue::string(*rope.type));
        kv.set(key("rope.scaling.factor"), f32(*rope.factor));
        if (*rope.type == "yarn") {
            if (!rope.orig_ctx) f.fail("rope_scaling", "yarn needs original_max_position_embeddings");
            kv.set(key("rope.scaling.original_context_length"), u32(*rope.orig_ctx));
            if (rope.yarn_ext) kv.set(key("rope.scaling.yarn_ext_factor"), f32(*rope.yarn_ext));
            if (rope.yarn_attn) kv.set(key("rope.scaling.yarn_attn_factor"), f32(*rope.yarn_attn));
            if (rope.beta_fast) kv.set(key("rope.scaling.yarn_beta_fast"), f32(*rope.beta_fast));
            if (rope.beta_slow) kv.set(key("rope.scaling.yarn_beta_slow"), f32(*rope.beta_slow));
        }
    } else if (rope.type && (*rope.type == "su" || *rope.type == "longrope")) {
        kv.set(key("rope.scaling.type"), GgufValue::string("longrope"));
    }
    if (rope.theta) kv.set(key("rope.freq_base"), f32(*rope.theta));
    if (rope.theta_swa) kv.set(key("rope.freq_base_swa"), f32(*rope.theta_swa));
    if (auto v = f.has("rms_norm_eps") ? f.opt_float("rms_norm_eps") : f.opt_float("norm_eps"))
        kv.set(key("attention.layer_norm_rms_epsilon"), f32(*v));
    if (auto v = first_int({"num_local_experts", "num_experts", "n_routed_experts"}))
        kv.set(key("expert_count"), u32(*v));
    if (auto v = first_int({"num_experts_per_tok", "num_experts_per_token", "top_k_experts"}))
        kv.set(key("expert_used_count"), u32(*v));
    if (auto v = f.opt_int("head_dim")) {
        kv.set(key("attention.key_length"), u32(*v));
        kv.set(key("attention.value_length"), u32(*v));
    }

    if (arch == "llama") {  // LlamaModel
        kv.set(key("vocab_size"), u32(cfg.hparams.n_vocab));
        kv.set(key("rope.dimension_count"),
               u32(f.opt_int("head_dim").value_or(cfg.hparams.n_embd / cfg.hparams.n_head)));
    } else if (arch == "gemma3") {  // Gemma3Model, with its own defaults for what the config leaves out
        kv.set(key("context_length"), u32(f.opt_int("max_position_embeddings").value_or(131072)));
        kv.set(key("attention.head_count"), u32(f.opt_int("num_attention_heads").value_or(8)));
        kv.set(key("attention.layer_norm_rms_epsilon"), f32(f.opt_float("rms_norm_eps").value_or(1e-6)));
        kv.set(key("attention.key_length"), u32(f.opt_int("head_dim").value_or(256)));
        kv.set(key("attention.value_length"), u32(f.opt_int("head_dim").value_or(256)));
        kv.set(key("rope.freq_base"), f32(rope.theta.value_or(1e6)));
        if (auto cap = f.opt_float("final_logit_softcapping"); cap && *cap != 0)
            kv.set(key("final_logit_softcapping"), f32(*cap));
        if (f.opt_int("sliding_window_pattern") != std::optional<int64_t>(1)) {
            const auto window = f.opt_int("sliding_window");
            if (!window) f.fail("sliding_window", "missing (llama.cpp's converter requires it for Gemma 3)");
            kv.set(key("attention.sliding_window"), u32(*window));
        }
        kv.set(key("attention.head_count_kv"), u32(f.opt_int("num_key_value_heads").value_or(4)));
    } else if (arch == "qwen3moe") {  // Qwen2MoeModel
        if (auto v = f.opt_int("moe_intermediate_size")) kv.set(key("expert_feed_forward_length"), u32(*v));
    } else if (arch == "gpt-oss") {  // GptOssModel
        const auto window = f.opt_int("sliding_window");
        if (!window) f.fail("sliding_window", "missing (llama.cpp's converter requires it for gpt-oss)");
        kv.set(key("attention.sliding_window"), u32(*window));
        if (auto v = f.opt_int("intermediate_size")) kv.set(key("expert_feed_forward_length"), u32(*v));
    } else if (arch != "qwen2" && arch != "qwen3") {
        throw HfCheckpointError(path + ": no GGUF metadata rules for architecture '" + arch + "'");
    }
}

struct TokenList {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
};

// ModelBase._create_vocab_sentencepiece: tokenizer.model's pieces over vocab_size "[PADi]" slots,
// then added_tokens.json and tokenizer_config.json's added_tokens_decoder.
TokenList sentencepiece_tokens(const fs::path& dir, const HfConfig& cfg, const std::optional<json>& tok_cfg) {
    const std::string spm_path = (dir / "tokenizer.model").string();
    sentencepiece::SentencePieceProcessor sp;
    if (const auto status = sp.Load(spm_path); !status.ok())
        throw HfCheckpointError(spm_path + ": not a SentencePiece model: " + status.ToString());
    const JsonFields f(cfg.stated, (dir / "config.json").string());
    const int64_t n =
        f.opt_int("vocab_size_per_layer_input").value_or(f.opt_int("vocab_size").value_or(sp.GetPieceSize()));
    TokenList t;
    for (int64_t i = 0; i < n; ++i) {
        t.tokens.push_back("[PAD" + std::to_string(i) + "]");
        t.scores.push_back(-10000.0f);
        t.types.push_back(kTokenUnused);
    }
    for (int id = 0; id < sp.GetPieceSize() && id < n; ++id) {
        t.tokens[id] = sp.IdToPiece(id);
        t.scores[id] = sp.GetScore(id);
        t.types[id] = sp.IsUnknown(id)   ? kTokenUnknown
                      : sp.IsControl(id) ? kTokenControl
                      : sp.IsUnused(id)  ? kTokenUnused
                      : sp.IsByte(id)    ? kTokenByte
                                         : kTokenNormal;
    }
    const auto set = [&](int64_t id, std::string text, int32_t type) {
        if (id < 0 || id >= n) return;  // the converter skips ids past vocab_size
        t.tokens[id] = std::move(text);
        t.scores[id] = -1000.0f;
        t.types[id] = type;
    };
    if (const fs::path added = dir / "added_tokens.json"; fs::is_regular_file(added)) {
        const json a = read_json_file(added.string());
        if (!a.is_object()) throw HfCheckpointError(added.string() + ": expected an object of token -> id");
        for (const auto& [text, id] : a.items()) {
            if (!id.is_number_integer())
                throw HfCheckpointError(added.string() + ": token " + json(text).dump() + " has id " + id.dump());
            set(id.get<int64_t>(), text, kTokenUserDefined);
        }
    }
    if (tok_cfg && tok_cfg->contains("added_tokens_decoder") && (*tok_cfg)["added_tokens_decoder"].is_object()) {
        const std::string cfg_path = (dir / "tokenizer_config.json").string();
        for (const auto& [id_text, entry] : (*tok_cfg)["added_tokens_decoder"].items()) {
            const JsonFields e(entry, cfg_path, "added_tokens_decoder." + id_text);
            auto content = e.opt_string("content");
            if (!content) e.fail("content", "missing");
            int64_t id = -1;
            try {
                id = std::stoll(id_text);
            } catch (const std::exception&) {
                e.fail("", "the key is not a token id");
            }
            if (e.opt_bool("special").value_or(false) || looks_like_control_token(*content)) {
                set(id, *content, kTokenControl);
            } else {
                for (size_t p; (p = content->find("\xE2\x96\x81")) != std::string::npos;) content->replace(p, 3, " ");
                set(id, *content, kTokenUserDefined);
            }
        }
    }
    return t;
}

std::optional<std::string> token_text(const json& cfg, const std::string& key) {
    if (!cfg.is_object() || !cfg.contains(key)) return std::nullopt;
    const json& v = cfg[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return std::nullopt;
}

// The id of a TemplateProcessing piece that is {"SpecialToken": {"id": ...}}, or "" (the
// Python code's falsy None).
std::string special_piece(const json& piece) {
    if (!piece.is_object() || !piece.contains("SpecialToken") || !piece["SpecialToken"].is_object()) return {};
    const json& id = piece["SpecialToken"].value("id", json());
    return id.is_string() ? id.get<std::string>() : std::string();
}

std::string sequence_piece(const json& piece) {
    if (!piece.is_object() || !piece.contains("Sequence") || !piece["Sequence"].is_object()) return {};
    const json& id = piece["Sequence"].value("id", json());
    return id.is_string() ? id.get<std::string>() : std::string();
}

// SpecialVocab's reading of a TemplateProcessing post-processor: BOS added when the single
// template starts with the BOS (or CLS) token, EOS when it ends with the EOS token, SEP when
// the pair template puts a SEP or EOS token between A and B.
template <class SetAdd>
void template_adds(const json& p, const std::optional<std::string>& bos, const std::optional<std::string>& cls,
                   const std::optional<std::string>& eos, const std::optional<std::string>& sep, SetAdd&& set_add) {
    const json single = p.value("single", json::array());
    json pair = p.value("pair", json::array());
    if (!single.is_array() || !pair.is_array()) return;
    std::string first, last;
    if (single.size() > 1) {
        first = special_piece(single.front());
        if (!first.empty()) set_add("bos", first == bos || first == cls, true);
        last = special_piece(single.back());
        if (!last.empty()) set_add("eos", last == eos, true);
    }
    if (pair.empty()) return;
    const size_t begin = !first.empty() && special_piece(pair.front()) == first ? 1 : 0;
    size_t end = !last.empty() && special_piece(pair.back()) == last ? pair.size() - 1 : pair.size();
    if (end <= begin) return;
    if (sequence_piece(pair[begin]) != "A" || sequence_piece(pair[end - 1]) != "B" || end - begin <= 2) return;
    const size_t mid = begin + 1, n_mid = end - 1 - mid;
    bool add_sep = false;
    const std::string entry = special_piece(pair[mid]);
    if (!entry.empty() && (entry == sep || entry == eos) && last.empty()) add_sep = true;
    if (n_mid == 2) {
        const std::string second = special_piece(pair[mid + 1]);
        if (!second.empty() && (second == sep || second == eos)) add_sep = true;
    }
    set_add("sep", add_sep, true);
}

// gguf-py's SpecialVocab (without merges): special token ids from tokenizer_config.json's texts
// looked up in tokenizer.json's added_tokens, then config.json's *_token_id; add_bos/add_eos from
// tokenizer.json's post-processor, then tokenizer_config.json; the chat template.
void special_vocab(KvList& kv, const fs::path& dir, const HfConfig& cfg, const std::optional<json>& tok_cfg,
                   const std::optional<std::string>& chat_template, int64_t n_vocab) {
    static constexpr const char* kTypes[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
    static constexpr const char* kIdKeys[] = {"bos_token_id",       "eos_token_id",     "unknown_token_id",
                                              "seperator_token_id", "padding_token_id", "cls_token_id",
                                              "mask_token_id"};
    std::vector<std::pair<int, int64_t>> ids;  // (kTypes index, id) in the order found
    std::vector<std::pair<std::string, bool>> adds;
    const auto set_id = [&](int typ, std::optional<int64_t> id) {
        if (!id || *id >= n_vocab) return;
        if (*id < 0)
            throw HfCheckpointError(dir.string() + ": invalid " + kTypes[typ] + " token id " + std::to_string(*id));
        for (const auto& [t, _] : ids)
            if (t == typ) return;
        ids.emplace_back(typ, *id);
    };
    const auto set_add = [&](const std::string& typ, bool v, bool overwrite) {
        for (auto& [t, old] : adds) {
            if (t == typ) {
                if (overwrite) old = v;
                return;
            }
        }
        adds.emplace_back(typ, v);
    };

    json added_tokens = json::array();
    const fs::path tj_path = dir / "tokenizer.json";
    if (fs::is_regular_file(tj_path)) {
        const json tj = read_json_file(tj_path.string());
        if (tj.contains("added_tokens") && tj["added_tokens"].is_array()) added_tokens = tj["added_tokens"];
        const json cfgj = tok_cfg.value_or(json::object());
        const auto bos = token_text(cfgj, "bos_token"), cls = token_text(cfgj, "cls_token"),
                   eos = token_text(cfgj, "eos_token");
        if (tj.contains("post_processor") && tj["post_processor"].is_object()) {
            const json& pp = tj["post_processor"];
            const json list = pp.contains("processors") ? pp["processors"] : json::array({pp});
            for (const json& p : list) {
                const std::string type = p.value("type", "");
                if (type == "ByteLevel") {
                    set_add("bos", false, false);
                    set_add("eos", false, false);
                } else if (type == "TemplateProcessing") {
                    template_adds(p, bos, cls, eos, token_text(cfgj, "sep_token"), set_add);
                }
            }
        }
    }
    if (tok_cfg) {
        for (int typ = 0; typ < 7; ++typ) {
            const std::string name = kTypes[typ];
            if (auto it = tok_cfg->find("add_" + name + "_token"); it != tok_cfg->end() && it->is_boolean())
                set_add(name, it->get<bool>(), false);
            const auto text = token_text(*tok_cfg, name + "_token");
            if (!text) continue;
            for (const json& a : added_tokens) {
                if (a.is_object() && a.value("content", "") == *text && a.contains("id") &&
                    a["id"].is_number_integer()) {
                    set_id(typ, a["id"].get<int64_t>());
                    break;
                }
            }
        }
    }
    const JsonFields f(cfg.stated, (dir / "config.json").string());
    for (int typ = 0; typ < 7; ++typ) {
        if (const json* v = f.get(std::string(kTypes[typ]) + "_token_id"); v && v->is_number_integer())
            set_id(typ, v->get<int64_t>());
    }
    for (const auto& [typ, id] : ids) kv.set(std::string("tokenizer.ggml.") + kIdKeys[typ], u32(id));
    for (const auto& [typ, v] : adds) {
        if (typ == "bos" || typ == "eos" || typ == "sep")
            kv.set("tokenizer.ggml.add_" + typ + "_token", GgufValue::boolean(v));
    }
    if (tok_cfg && chat_template) kv.set("tokenizer.chat_template", GgufValue::string(*chat_template));
}

// _set_vocab_gpt2: a tokenizer.json without tokenizer.model (hf_bpe_vocab.h), then SpecialVocab with
// its merges. LlamaModel first tries LlamaHfVocab, which takes a SentencePiece-style BPE
// tokenizer.json (byte_fallback, a Sequence decoder) as a "llama" vocabulary; that one is refused.
void bpe_vocabulary_metadata(KvList& kv, const fs::path& d, const HfConfig& cfg, const std::optional<json>& tok_cfg,
                             const HfTokenizerFacts& facts) {
    const fs::path tj_path = d / "tokenizer.json";
    if (!fs::is_regular_file(tj_path)) throw HfCheckpointError(d.string() + ": no tokenizer.json or tokenizer.model");
    if (cfg.hparams.architecture == "llama") {
        const json tj = read_json_file(tj_path.string());
        const json model = tj.value("model", json::object()), decoder = tj.value("decoder", json::object());
        if (model.is_object() && model.value("type", "") == "BPE" && model.value("byte_fallback", false) &&
            decoder.is_object() && decoder.value("type", "") == "Sequence") {
            throw HfCheckpointError(
                tj_path.string() +
                ": a SentencePiece-style BPE tokenizer.json (byte_fallback) without tokenizer.model; "
                "llama.cpp's converter writes it as a \"llama\" vocabulary (LlamaHfVocab), which deskside does not");
        }
    }
    const JsonFields f(cfg.stated, (d / "config.json").string());
    const HfBpeVocab v = read_hf_bpe_vocab(d.string(), f.opt_int("vocab_size"));
    kv.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
    kv.set("tokenizer.ggml.pre", GgufValue::string(v.pre));
    std::vector<GgufValue> tokens, types, merges;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        tokens.push_back(GgufValue::string(v.tokens[i]));
        types.push_back(GgufValue::i32(v.types[i]));
    }
    for (const std::string& m : v.merges) merges.push_back(GgufValue::string(m));
    kv.set("tokenizer.ggml.tokens", GgufValue::array(GgufType::STRING, std::move(tokens)));
    kv.set("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, std::move(types)));
    if (!merges.empty()) kv.set("tokenizer.ggml.merges", GgufValue::array(GgufType::STRING, std::move(merges)));
    // SpecialVocab without n_vocab: ids past the vocabulary are kept
    special_vocab(kv, d, cfg, tok_cfg, facts.chat_template, std::numeric_limits<int64_t>::max());
}

void vocabulary_metadata(KvList& kv, const std::string& dir, const HfConfig& cfg, const HfTokenizerFacts& facts) {
    const fs::path d(dir);
    std::optional<json> tok_cfg;
    if (const fs::path p = d / "tokenizer_config.json"; fs::is_regular_file(p)) tok_cfg = read_json_file(p.string());
    const std::string& arch = cfg.hparams.architecture;
    if (arch == "llama" && tok_cfg && tok_cfg->contains("add_prefix_space") &&
        (*tok_cfg)["add_prefix_space"].is_boolean())
        kv.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean((*tok_cfg)["add_prefix_space"].get<bool>()));
    // The family's set_vocab: _set_vocab_gpt2 always for Phi-4's GPT2Tokenizer, else a
    // tokenizer.model when there is one. (Qwen3MoeModel and GptOssModel call _set_vocab_gpt2 always;
    // their released checkpoints have no tokenizer.model, so they take that path here too. One of
    // theirs with a tokenizer.model, as make-hf-checkpoint.py writes for the synthetic models, is
    // given its SentencePiece vocabulary here, where the converter would stop.)
    const bool gpt2_tokenizer =
        tok_cfg && tok_cfg->is_object() && tok_cfg->value("tokenizer_class", json()) == "GPT2Tokenizer";
    const bool always_bpe = arch == "phi3" && gpt2_tokenizer;
    if (always_bpe || !fs::is_regular_file(d / "tokenizer.model")) {
        bpe_vocabulary_metadata(kv, d, cfg, tok_cfg, facts);
        return;
    }

    const TokenList t = sentencepiece_tokens(d, cfg, tok_cfg);
    kv.set("tokenizer.ggml.model", GgufValue::string("llama"));
    kv.set("tokenizer.ggml.pre", GgufValue::string("default"));
    std::vector<GgufValue> tokens, scores, types;
    for (size_t i = 0; i < t.tokens.size(); ++i) {
        tokens.push_back(GgufValue::string(t.tokens[i]));
        scores.push_back(GgufValue::f32(t.scores[i]));
        types.push_back(GgufValue::i32(t.types[i]));
    }
    kv.set("tokenizer.ggml.tokens", GgufValue::array(GgufType::STRING, std::move(tokens)));
    kv.set("tokenizer.ggml.scores", GgufValue::array(GgufType::F32, std::move(scores)));
    kv.set("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, std::move(types)));
    special_vocab(kv, d, cfg, tok_cfg, facts.chat_template, static_cast<int64_t>(t.tokens.size()));
    if (arch == "gemma3") kv.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(false));
}

}  // namespace

std::vector<std::pair<std::string, GgufValue>> hf_gguf_metadata(const std::string& dir) {
    const std::string config_path = (fs::path(dir) / "config.json").string();
    if (!fs::is_regular_file(config_path))
        throw HfCheckpointError(dir + ": no config.json (not a Hugging Face checkpoint directory)");
    const HfConfig cfg = parse_hf_config(read_json_file(config_path), config_path);
    const ModelInfo model = read_hf_checkpoint(dir, cfg).info;  // shapes only: experts stay unstacked

    KvList kv;
    kv.set("general.architecture", GgufValue::string(cfg.hparams.architecture));
    // Phi3MiniModel.generate_extra_tensors writes LongRoPE's factor as it makes the factor tensors,
    // which the converter does before any other key.
    if (!cfg.config_tensors.empty())
        kv.set(cfg.hparams.architecture + ".rope.scaling.attn_factor", f32(cfg.hparams.rope_attn_factor));
    kv.set("general.type", GgufValue::string("model"));
    general_metadata(kv, dir, model.n_params(), counted_size_label(model));
    architecture_metadata(kv, cfg, config_path);
    vocabulary_metadata(kv, dir, cfg, read_hf_tokenizer_facts(dir, cfg));
    return kv.take();
}

}  // namespace deskside::models
