#include "models/hf_tokenizer_facts.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "models/hf_json.h"

namespace deskside::models {

namespace {

namespace fs = std::filesystem;

// The vocabulary as the tokenizer files state it: token text -> id.
struct Vocab {
    std::map<std::string, int64_t, std::less<>> ids;
    int64_t n_tokens = 0;  // highest id + 1
    std::unique_ptr<sentencepiece::SentencePieceProcessor> spm;  // only when tokenizer.json is absent

    void add(const std::string& text, int64_t id) {
        ids.insert_or_assign(text, id);
        n_tokens = std::max(n_tokens, id + 1);
    }
    std::optional<int64_t> find(const std::string& text) const {
        if (auto it = ids.find(text); it != ids.end()) return it->second;
        if (spm) {
            const int id = spm->PieceToId(text);
            if (id >= 0 && spm->IdToPiece(id) == text) return id;
        }
        return std::nullopt;
    }
};

int64_t token_id_field(const JsonFields& f, std::string_view key) {
    const auto id = f.opt_int(key);
    if (!id || *id < 0) f.fail(key, "expected a non-negative token id");
    return *id;
}

// tokenizer.json: model.type and model.vocab, plus added_tokens. Returns the TokenizerInfo kind.
std::string read_tokenizer_json(const nlohmann::json& j, const std::string& path, Vocab& vocab) {
    const JsonFields root(j, path);
    const auto model = root.opt_object("model");
    if (!model) root.fail("model", "missing");
    const std::string type = model->opt_string("type").value_or("");
    const nlohmann::json* v = model->get("vocab");
    if (!v) model->fail("vocab", "missing");
    if (type == "Unigram") {
        if (!v->is_array()) model->fail("vocab", "expected an array of [piece, score] pairs");
        int64_t id = 0;
        for (const auto& entry : *v) {
            if (!entry.is_array() || entry.empty() || !entry[0].is_string())
                model->fail("vocab", "entry " + std::to_string(id) + " is not a [piece, score] pair");
            vocab.add(entry[0].get<std::string>(), id++);
        }
    } else if (type == "BPE" || type == "WordPiece" || type == "WordLevel") {
        if (!v->is_object()) model->fail("vocab", "expected an object of token -> id");
        for (const auto& [text, id] : v->items()) {
            if (!id.is_number_unsigned()) model->fail("vocab", "token " + nlohmann::json(text).dump() + " has id " + id.dump());
            vocab.add(text, id.get<int64_t>());
        }
    } else {
        model->fail("type", "tokenizer model '" + type + "' is not supported (BPE, Unigram, WordPiece)");
    }
    if (const nlohmann::json* added = root.get("added_tokens")) {
        if (!added->is_array()) root.fail("added_tokens", "expected an array");
        for (size_t k = 0; k < added->size(); ++k) {
            const JsonFields t((*added)[k], path, "added_tokens[" + std::to_string(k) + "]");
            const auto content = t.opt_string("content");
            if (!content) t.fail("content", "missing");
            vocab.add(*content, token_id_field(t, "id"));
        }
    }
    // SentencePiece models exported to tokenizer.json are BPE with byte fallback (or Unigram);
    // byte-level BPE (GPT-2 style) is what llama.cpp calls "gpt2".
    if (type == "Unigram") return "t5";
    if (type == "WordPiece") return "bert";
    if (type == "BPE" && model->opt_bool("byte_fallback").value_or(false)) return "llama";
    return "gpt2";
}

// tokenizer_config.json's "bos_token" and friends: a string, or an AddedToken object.
std::optional<std::string> special_text(const JsonFields& cfg, std::string_view key) {
    const nlohmann::json* v = cfg.get(key);
    if (!v) return std::nullopt;
    if (v->is_string()) return v->get<std::string>();
    if (v->is_object()) {
        if (auto it = v->find("content"); it != v->end() && it->is_string()) return it->get<std::string>();
    }
    cfg.fail(key, "expected a token string or an object with \"content\", found " + v->dump());
}

// A special token id from tokenizer_config.json (by text), else config.json, else SentencePiece.
std::optional<int64_t> special_id(const std::optional<JsonFields>& cfg, std::string_view key, const Vocab& vocab,
                                  std::optional<int64_t> from_config, int spm_id) {
    if (cfg) {
        if (const auto text = special_text(*cfg, key)) {
            const auto id = vocab.find(*text);
            if (!id) cfg->fail(key, "token " + nlohmann::json(*text).dump() + " is not in the vocabulary");
            return id;
        }
    }
    if (from_config) return from_config;
    if (vocab.spm && spm_id >= 0) return spm_id;
    return std::nullopt;
}

// Whether tokenizer.json's post-processor puts `id` first (or last) around a single sequence.
std::optional<bool> template_adds(const nlohmann::json& processor, const Vocab& vocab, std::optional<int64_t> id, bool first) {
    if (!processor.is_object()) return std::nullopt;
    const auto type = processor.value("type", std::string());
    if (type == "Sequence") {
        for (const auto& p : processor.value("processors", nlohmann::json::array())) {
            if (const auto r = template_adds(p, vocab, id, first)) return r;
        }
        return std::nullopt;
    }
    if (type != "TemplateProcessing") return std::nullopt;
    const auto& single = processor.value("single", nlohmann::json::array());
    if (!single.is_array() || single.empty()) return false;
    const auto& piece = first ? single.front() : single.back();
    if (!piece.is_object() || !piece.contains("SpecialToken")) return false;
    const auto& text = piece["SpecialToken"].value("id", std::string());
    return id && vocab.find(text) == id;
}

std::optional<std::string> read_text_file(const fs::path& p) {
    if (!fs::is_regular_file(p)) return std::nullopt;
    std::ifstream in(p, std::ios::binary);
    if (!in) throw HfCheckpointError(p.string() + ": cannot open");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// tokenizer_config.json's "chat_template" (a string, or a list of {name, template} from which
// the "default" one is used), else chat_template.jinja, else chat_template.json.
std::optional<std::string> read_chat_template(const fs::path& dir, const std::optional<JsonFields>& cfg) {
    if (cfg) {
        if (const nlohmann::json* t = cfg->get("chat_template")) {
            if (t->is_string()) return t->get<std::string>();
            if (!t->is_array()) cfg->fail("chat_template", "expected a string or a list of {name, template}");
            for (const auto& entry : *t) {
                if (entry.is_object() && entry.value("name", "") == "default") {
                    if (!entry.contains("template") || !entry["template"].is_string())
                        cfg->fail("chat_template", "the \"default\" entry has no template string");
                    return entry["template"].get<std::string>();
                }
            }
            return std::nullopt;
        }
    }
    if (auto jinja = read_text_file(dir / "chat_template.jinja")) return jinja;
    if (fs::is_regular_file(dir / "chat_template.json")) {
        const std::string path = (dir / "chat_template.json").string();
        const nlohmann::json j = read_json_file(path);
        return JsonFields(j, path).opt_string("chat_template");
    }
    return std::nullopt;
}

}  // namespace

HfTokenizerFacts read_hf_tokenizer_facts(const std::string& dir, const HfConfig& config) {
    const fs::path d(dir);
    HfTokenizerFacts out;
    TokenizerInfo& t = out.info;
    t.kind = "none";

    std::optional<nlohmann::json> cfg_json;
    std::optional<JsonFields> cfg;
    const std::string cfg_path = (d / "tokenizer_config.json").string();
    if (fs::is_regular_file(cfg_path)) {
        cfg_json = read_json_file(cfg_path);
        cfg.emplace(*cfg_json, cfg_path);
    }
    out.chat_template = read_chat_template(d, cfg);

    Vocab vocab;
    const std::string json_path = (d / "tokenizer.json").string();
    const std::string spm_path = (d / "tokenizer.model").string();
    const bool has_spm = fs::is_regular_file(spm_path);
    std::optional<nlohmann::json> tok_json;
    if (fs::is_regular_file(json_path)) {
        tok_json = read_json_file(json_path);
        t.kind = read_tokenizer_json(*tok_json, json_path, vocab);
    } else if (has_spm) {
        vocab.spm = std::make_unique<sentencepiece::SentencePieceProcessor>();
        const auto status = vocab.spm->Load(spm_path);
        if (!status.ok()) throw HfCheckpointError(spm_path + ": not a SentencePiece model: " + status.ToString());
        vocab.n_tokens = vocab.spm->GetPieceSize();
    } else {
        return out;
    }
    if (has_spm) t.kind = "llama";  // llama.cpp builds its SentencePiece vocabulary from tokenizer.model
    if (cfg) {
        if (const auto added = cfg->opt_object("added_tokens_decoder")) {
            for (const auto& [id_text, entry] : cfg_json->at("added_tokens_decoder").items()) {
                const JsonFields e(entry, cfg_path, "added_tokens_decoder." + id_text);
                const auto content = e.opt_string("content");
                int64_t id = -1;
                try {
                    size_t used = 0;
                    id = std::stoll(id_text, &used);
                    if (used != id_text.size()) id = -1;
                } catch (const std::exception&) {
                }
                if (!content || id < 0) added->fail(id_text, "expected a token id key with an object holding \"content\"");
                vocab.add(*content, id);
            }
        }
    }

    // As in GGUF files, the vocabulary spans the model's embedding rows when those are more
    // (llama.cpp's converter pads the token list to vocab_size).
    t.n_vocab = std::max(vocab.n_tokens, config.hparams.n_vocab);
    const auto* spm = vocab.spm.get();
    t.bos = special_id(cfg, "bos_token", vocab, config.bos_token_id, spm ? spm->bos_id() : -1);
    t.eos = special_id(cfg, "eos_token", vocab, config.eos_token_id, spm ? spm->eos_id() : -1);
    t.unk = special_id(cfg, "unk_token", vocab, std::nullopt, spm ? spm->unk_id() : -1);
    t.pad = special_id(cfg, "pad_token", vocab, config.pad_token_id, spm ? spm->pad_id() : -1);

    std::optional<bool> add_bos = cfg ? cfg->opt_bool("add_bos_token") : std::nullopt;
    std::optional<bool> add_eos = cfg ? cfg->opt_bool("add_eos_token") : std::nullopt;
    if ((!add_bos || !add_eos) && tok_json) {
        if (auto it = tok_json->find("post_processor"); it != tok_json->end()) {
            try {
                if (!add_bos) add_bos = template_adds(*it, vocab, t.bos, true);
                if (!add_eos) add_eos = template_adds(*it, vocab, t.eos, false);
            } catch (const nlohmann::json::exception& e) {
                throw HfCheckpointError(json_path + ": field 'post_processor': " + e.what());
            }
        }
    }
    // SentencePiece vocabularies add BOS unless told otherwise, as in the GGUF path.
    t.add_bos = add_bos.value_or(t.kind == "llama");
    t.add_eos = add_eos.value_or(false);
    return out;
}

}  // namespace deskside::models
