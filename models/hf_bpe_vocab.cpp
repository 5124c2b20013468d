// read_hf_bpe_vocab: tokenizer.json's vocabulary in the converter's terms. Tokens by id are the
// model's vocab overlaid with added_tokens (what transformers' tokenizer.vocab holds); an added
// token is CONTROL when marked special or when it looks special, else USER_DEFINED with U+2581
// written as a space; every other token is NORMAL, and an id with no token is "[PAD<id>]",
// UNUSED. Merges stored as pairs are joined with a space, a space inside a side written as
// U+0120 (gguf-py does so since transformers 4.45 writes pairs).
//
// The converter writes an added token whose `normalized` is false as the tokenizer decodes its
// encoding; for the byte-level tokenizers read here that is the token's own text, which is what
// is written.
#include "models/hf_bpe_vocab.h"

#include <filesystem>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "models/hf_json.h"
#include "models/store/sha256.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::models {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct BpePreHash {
    std::string_view hash;
    std::string_view name;
};

#include "models/bpe_pre_hashes.inc"

// A pair's side with its spaces as U+0120, as gguf-py writes pair merges.
std::string encode_spaces(const std::string& side) {
    std::string out;
    for (char c : side) out += c == ' ' ? std::string("\xC4\xA0") : std::string(1, c);
    return out;
}

std::vector<std::string> read_merges(const json& model, const std::string& file) {
    std::vector<std::string> out;
    const json merges = model.value("merges", json::array());
    if (!merges.is_array() || merges.empty()) return out;
    const bool pairs = merges[0].is_array();
    out.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        const json& m = merges[i];
        if (!pairs && m.is_string()) {
            out.push_back(m.get<std::string>());
        } else if (pairs && m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            out.push_back(encode_spaces(m[0].get<std::string>()) + " " + encode_spaces(m[1].get<std::string>()));
        } else {
            throw HfCheckpointError(file + ": model.merges[" + std::to_string(i) +
                                    "]: expected \"a b\" or [\"a\", \"b\"] like the first merge");
        }
    }
    return out;
}

}  // namespace

bool looks_like_control_token(std::string_view t) {
    const auto wrapped = [&](std::string_view open, std::string_view close) {
        return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
    };
    return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
           wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

std::string_view bpe_check_text() {
    return kBpePreCheckText;
}

std::string bpe_check_hash(const Tokenizer& tokenizer) {
    // add_special: the converter calls transformers' encode, which adds what the post-processor adds.
    const std::vector<int32_t> ids = tokenizer.encode(kBpePreCheckText, /*add_special=*/true, /*parse_special=*/true);
    std::string text = "[";
    for (size_t i = 0; i < ids.size(); ++i) text += (i ? ", " : "") + std::to_string(ids[i]);
    text += "]";
    store::Sha256 sha;
    sha.update(text);
    return sha.hex_digest();
}

std::optional<std::string> bpe_pre_name(std::string_view hash) {
    for (const BpePreHash& row : kBpePreHashes)
        if (row.hash == hash) return std::string(row.name);
    return std::nullopt;
}

HfBpeVocab read_hf_bpe_vocab(const std::string& dir, std::optional<int64_t> vocab_size) {
    const std::string file = (fs::path(dir) / "tokenizer.json").string();
    const json root = read_json_file(file);
    if (!root.is_object() || !root.contains("model") || !root["model"].is_object())
        throw HfCheckpointError(file + ": no model object");
    const json& model = root["model"];
    if (model.value("type", std::string()) != "BPE")
        throw HfCheckpointError(file + ": model.type '" + model.value("type", std::string()) +
                                "': only BPE tokenizer.json files are converted");

    // (id, text) of the model's vocab, then of added_tokens, which win where both name an id (what
    // transformers' tokenizer.vocab and its reverse hold); the added tokens' special flags by id.
    std::vector<std::pair<int64_t, std::string>> entries;
    const json& vocab = model.value("vocab", json::object());
    if (!vocab.is_object()) throw HfCheckpointError(file + ": model.vocab: expected an object");
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        if (!it.value().is_number_integer())
            throw HfCheckpointError(file + ": model.vocab." + it.key() + ": expected an integer id");
        entries.emplace_back(it.value().get<int64_t>(), it.key());
    }
    std::unordered_set<std::string> added, texts;
    std::unordered_map<int64_t, bool> special;
    const json& added_tokens = root.value("added_tokens", json::array());
    for (size_t i = 0; i < added_tokens.size(); ++i) {
        const json& a = added_tokens[i];
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
            !a["content"].is_string())
            throw HfCheckpointError(file + ": added_tokens[" + std::to_string(i) + "]: expected {id, content, ...}");
        entries.emplace_back(a["id"].get<int64_t>(), a["content"].get<std::string>());
        added.insert(entries.back().second);
        special[entries.back().first] = a.value("special", false);
    }
    for (const auto& [id, text] : entries) texts.insert(text);

    const int64_t n = vocab_size.value_or(static_cast<int64_t>(texts.size()));
    HfBpeVocab out;
    out.tokens.resize(n);
    out.types.assign(n, kTokenUnused);
    std::vector<bool> filled(n, false);
    for (const auto& [id, text] : entries) {
        if (id < 0 || id >= n)
            throw HfCheckpointError(file + ": token id " + std::to_string(id) +
                                    " is not below config.json's vocab_size " + std::to_string(n));
        out.tokens[id] = text;
        filled[id] = true;
    }
    for (int64_t id = 0; id < n; ++id) {
        std::string& t = out.tokens[id];
        const auto flag = special.find(id);
        if (!filled[id]) {
            t = "[PAD" + std::to_string(id) + "]";
        } else if (!added.contains(t)) {
            out.types[id] = kTokenNormal;
        } else if ((flag != special.end() && flag->second) || looks_like_control_token(t)) {
            out.types[id] = kTokenControl;
        } else {
            for (size_t p; (p = t.find("\xE2\x96\x81")) != std::string::npos;) t.replace(p, 3, " ");
            out.types[id] = kTokenUserDefined;
        }
    }
    out.merges = read_merges(model, file);

    std::unique_ptr<Tokenizer> tokenizer;
    try {
        tokenizer = Tokenizer::from_hf_dir(dir);
    } catch (const TokenizerError& e) {
        throw HfCheckpointError(std::string(e.what()) +
                                " (deskside tokenizes llama.cpp's test text with it to name the pre-tokenizer)");
    }
    const std::string hash = bpe_check_hash(*tokenizer);
    const auto name = bpe_pre_name(hash);
    if (!name) {
        throw HfCheckpointError(
            file + ": llama.cpp does not know this BPE pre-tokenizer (the ids of its test text hash to " + hash +
            "; convert_hf_to_gguf.py refuses it too, until get_vocab_base_pre lists the hash)");
    }
    out.pre = *name;
    return out;
}

}  // namespace deskside::models
