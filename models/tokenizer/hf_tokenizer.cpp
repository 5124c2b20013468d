// Tokenizer::from_hf_dir: a Hugging Face checkpoint's tokenizer files. tokenizer.json with a
// byte-level BPE model (GPT-2, Llama 3, Qwen ...) is run by our BPE encoder with the file's own
// pre-tokenizer patterns; otherwise tokenizer.model goes to libsentencepiece.
// tokenizer_config.json supplies BOS/EOS and add_bos_token/add_eos_token.
// ref: https://huggingface.co/docs/tokenizers/api/pre-tokenizers (Split, ByteLevel, Sequence)
#include <filesystem>

#include "models/hf_json.h"
#include "models/tokenizer/encoder.h"
#include "models/tokenizer/tokenizer.h"
#include "models/tokenizer/vocab.h"

namespace deskside::models {

using nlohmann::json;
using tokenizer::Vocab;

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& path, const std::string& what) {
    throw TokenizerError(file + ": " + path + ": " + what);
}

// Literal text as a PCRE2 pattern.
std::string quote_pattern(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

void collect_pretokenizer(const json& pt, tokenizer::PreTokenizerSpec& spec, const std::string& file,
                          const std::string& path) {
    if (pt.is_null()) return;
    if (!pt.is_object() || !pt.contains("type") || !pt["type"].is_string()) fail(file, path, "expected an object with a type");
    const std::string type = pt["type"];
    if (type == "Sequence") {
        const json& list = pt.value("pretokenizers", json::array());
        if (!list.is_array()) fail(file, path + ".pretokenizers", "expected an array");
        for (size_t i = 0; i < list.size(); ++i) {
            collect_pretokenizer(list[i], spec, file, path + ".pretokenizers[" + std::to_string(i) + "]");
        }
    } else if (type == "Split") {
        const json& pattern = pt.value("pattern", json());
        if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
            spec.patterns.push_back(pattern["Regex"]);
        } else if (pattern.contains("String") && pattern["String"].is_string()) {
            spec.patterns.push_back(quote_pattern(pattern["String"]));
        } else {
            fail(file, path + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
        }
        if (pt.value("behavior", std::string("Isolated")) != "Isolated" || pt.value("invert", false)) {
            fail(file, path, "only Split with behavior Isolated and invert false is supported");
        }
    } else if (type == "ByteLevel") {
        spec.byte_level = true;
        if (pt.value("add_prefix_space", false)) fail(file, path + ".add_prefix_space", "true is not supported");
        if (pt.value("use_regex", true)) spec.patterns.push_back(tokenizer::kGpt2Pattern);
    } else {
        fail(file, path + ".type", "pre-tokenizer '" + type + "' is not supported");
    }
}

// "bos_token": "<s>" or {"content": "<s>", ...} or null.
std::optional<std::string> config_token(const json& config, const char* key) {
    if (!config.is_object() || !config.contains(key)) return std::nullopt;
    const json& v = config[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return std::nullopt;
}

// Settings from tokenizer_config.json that apply to both tokenizer.json and tokenizer.model.
void apply_config(Vocab& vocab, const json& config, const std::string& file) {
    if (!config.is_object()) return;
    if (auto t = config_token(config, "bos_token")) {
        vocab.bos = vocab.find(*t);
        if (vocab.bos == Vocab::kNone) fail(file, "bos_token", "'" + *t + "' is not in the vocabulary");
    }
    if (auto t = config_token(config, "eos_token")) {
        vocab.eos = vocab.find(*t);
        if (vocab.eos == Vocab::kNone) fail(file, "eos_token", "'" + *t + "' is not in the vocabulary");
    }
    if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) vocab.add_bos = config["add_bos_token"];
    if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) vocab.add_eos = config["add_eos_token"];
    if (config.contains("clean_up_tokenization_spaces") && config["clean_up_tokenization_spaces"].is_boolean()) {
        vocab.clean_spaces = config["clean_up_tokenization_spaces"];
    }
    if (vocab.add_bos && vocab.bos == Vocab::kNone) fail(file, "add_bos_token", "true but there is no bos_token");
    if (vocab.add_eos && vocab.eos == Vocab::kNone) fail(file, "add_eos_token", "true but there is no eos_token");
}

// Whether the post-processor puts a special token first (Llama 3's TemplateProcessing).
bool template_adds_bos(const json& post) {
    if (!post.is_object()) return false;
    if (post.value("type", std::string()) == "Sequence") {
        for (const json& p : post.value("processors", json::array())) {
            if (template_adds_bos(p)) return true;
        }
        return false;
    }
    if (post.value("type", std::string()) != "TemplateProcessing") return false;
    const json& single = post.value("single", json::array());
    return single.is_array() && !single.empty() && single[0].is_object() && single[0].contains("SpecialToken");
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_dir(const std::string& dir) {
    // Field checks above name the JSON path; a value of an unexpected type deeper down
    // surfaces as a json exception, reported with the directory.
    try {
        return from_hf_files(dir);
    } catch (const nlohmann::json::exception& e) {
        throw TokenizerError(dir + ": malformed tokenizer file: " + e.what());
    }
}

std::unique_ptr<Tokenizer> Tokenizer::from_hf_files(const std::string& dir) {
    namespace fs = std::filesystem;
    const std::string json_path = (fs::path(dir) / "tokenizer.json").string();
    const std::string spm_path = (fs::path(dir) / "tokenizer.model").string();
    const std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();
    std::error_code ec;
    json config;
    try {
        if (fs::exists(config_path, ec)) config = read_json_file(config_path);
    } catch (const HfCheckpointError& e) {
        throw TokenizerError(e.what());
    }

    if (!fs::exists(json_path, ec)) {
        if (!fs::exists(spm_path, ec)) throw TokenizerError(dir + ": no tokenizer.json or tokenizer.model");
        auto tok = from_sentencepiece(spm_path);
        apply_config(*tok->vocab_, config, config_path);
        return tok;
    }

    json root;
    try {
        root = read_json_file(json_path);
    } catch (const HfCheckpointError& e) {
        throw TokenizerError(e.what());
    }
    const std::string& file = json_path;
    if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) fail(file, "model", "missing");
    const json& model = root["model"];
    const std::string model_type = model.value("type", std::string());
    if (model_type != "BPE") {
        if (fs::exists(spm_path, ec)) {
            auto tok = from_sentencepiece(spm_path);
            apply_config(*tok->vocab_, config, config_path);
            return tok;
        }
        fail(file, "model.type", "'" + model_type + "' models are not supported (only BPE)");
    }

    tokenizer::PreTokenizerSpec spec;
    spec.byte_level = false;
    collect_pretokenizer(root.value("pre_tokenizer", json()), spec, file, "pre_tokenizer");
    if (!spec.byte_level) {
        if (fs::exists(spm_path, ec)) {
            auto tok = from_sentencepiece(spm_path);
            apply_config(*tok->vocab_, config, config_path);
            return tok;
        }
        fail(file, "pre_tokenizer", "only byte-level BPE tokenizers are supported (no ByteLevel pre-tokenizer found)");
    }
    // NFC is accepted and not applied: text is taken as already NFC-normalized, as llama.cpp does.
    const json& normalizer = root.value("normalizer", json());
    if (!normalizer.is_null() && normalizer.value("type", std::string()) != "NFC") {
        fail(file, "normalizer", "normalizer '" + normalizer.value("type", std::string("?")) + "' is not supported");
    }

    // Tokens by id: the model's vocab, then added_tokens (which may extend or re-type it).
    const json& vocab_json = model.value("vocab", json::object());
    if (!vocab_json.is_object()) fail(file, "model.vocab", "expected an object");
    std::vector<std::pair<std::string, uint32_t>> by_id;
    auto place = [&](int64_t id, std::string text, uint32_t attr, const std::string& where) {
        if (id < 0 || id > INT32_MAX / 2) fail(file, where, "bad token id " + std::to_string(id));
        if (by_id.size() <= static_cast<size_t>(id)) by_id.resize(id + 1);
        by_id[id] = {std::move(text), attr};
    };
    for (auto it = vocab_json.begin(); it != vocab_json.end(); ++it) {
        if (!it.value().is_number_integer()) fail(file, "model.vocab." + it.key(), "expected an integer id");
        place(it.value().get<int64_t>(), it.key(), tokenizer::kAttrNormal, "model.vocab." + it.key());
    }
    const json& added = root.value("added_tokens", json::array());
    if (!added.is_array()) fail(file, "added_tokens", "expected an array");
    std::vector<std::pair<int64_t, uint32_t>> strip_flags;
    for (size_t i = 0; i < added.size(); ++i) {
        const std::string where = "added_tokens[" + std::to_string(i) + "]";
        const json& a = added[i];
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
            !a["content"].is_string()) {
            fail(file, where, "expected {id, content, ...}");
        }
        uint32_t attr = a.value("special", false) ? tokenizer::kAttrControl : tokenizer::kAttrUserDefined;
        if (a.value("lstrip", false)) attr |= tokenizer::kAttrLStrip;
        if (a.value("rstrip", false)) attr |= tokenizer::kAttrRStrip;
        place(a["id"].get<int64_t>(), a["content"].get<std::string>(), attr, where);
    }

    auto vocab = std::make_unique<Vocab>();
    vocab->kind = tokenizer::VocabKind::Bpe;
    vocab->byte_level = true;
    vocab->ignore_merges = model.value("ignore_merges", false);
    vocab->texts.reserve(by_id.size());
    for (size_t id = 0; id < by_id.size(); ++id) {
        auto& [text, attr] = by_id[id];
        if (text.empty()) {
            text = "[PAD" + std::to_string(id) + "]";  // a hole in the id range: never matched or printed
            attr = 0;
        }
        try {
            vocab->add_token(std::move(text), 0.0f, attr);
        } catch (const std::runtime_error& e) {
            fail(file, "model.vocab", e.what());
        }
    }

    const json& merges = model.value("merges", json::array());
    if (!merges.is_array()) fail(file, "model.merges", "expected an array");
    vocab->merge_ids.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        const json& m = merges[i];
        if (m.is_string()) {
            vocab->add_merge(m.get<std::string>(), static_cast<int>(i));
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            vocab->add_merge(m[0].get<std::string>() + " " + m[1].get<std::string>(), static_cast<int>(i));
        } else {
            fail(file, "model.merges[" + std::to_string(i) + "]", "expected \"a b\" or [\"a\", \"b\"]");
        }
    }

    vocab->clean_spaces = false;
    vocab->add_bos = template_adds_bos(root.value("post_processor", json()));
    apply_config(*vocab, config, config_path);
    vocab->finalize(fs::path(dir).filename().string());

    std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(vocab), "bpe"));
    tok->set_encoder(tokenizer::make_bpe_encoder(*tok->vocab_, spec));
    return tok;
}

}  // namespace deskside::models
