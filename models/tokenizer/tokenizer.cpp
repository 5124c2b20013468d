// Tokenizer: special-token partitioning, BOS/EOS, decoding, and the streaming decoder. The
// loaders live in gguf_tokenizer.cpp, hf_tokenizer.cpp and sentencepiece_tokenizer.cpp.
#include "models/tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "models/gguf.h"
#include "models/tokenizer/encoder.h"
#include "models/tokenizer/utf8.h"
#include "models/tokenizer/vocab.h"

namespace deskside::models {

using tokenizer::Vocab;

// A run of text still to be tokenized, or a special token found in the text.
struct Tokenizer::Fragment {
    int32_t token;  // Vocab::kNone for text
    size_t offset;
    size_t size;
};

Tokenizer::Tokenizer(std::unique_ptr<Vocab> vocab, std::string kind)
    : vocab_(std::move(vocab)), kind_(std::move(kind)), special_by_first_byte_(256) {
    for (int32_t id : vocab_->special_ids) {
        const std::string& t = vocab_->texts[id];
        if (!t.empty()) special_by_first_byte_[static_cast<uint8_t>(t[0])].push_back(id);
    }
}

Tokenizer::~Tokenizer() = default;

void Tokenizer::set_encoder(std::unique_ptr<tokenizer::Encoder> encoder) { encoder_ = std::move(encoder); }

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(path, ec)) return from_hf_dir(path);
    if (!fs::exists(path, ec)) throw TokenizerError(path + ": no such file or directory");
    if (fs::path(path).filename() == "tokenizer.json") return from_hf_dir(fs::path(path).parent_path().string());
    char magic[4] = {};
    std::ifstream in(path, std::ios::binary);
    in.read(magic, 4);
    if (in.gcount() == 4 && std::string_view(magic, 4) == "GGUF") return from_gguf(GgufFile::open(path));
    if (fs::path(path).extension() == ".model") return from_sentencepiece(path);
    throw TokenizerError(path + ": not a GGUF file, a Hugging Face directory or a SentencePiece .model file");
}

// Cuts special tokens out of the text the way llama.cpp does: longest token text first, each
// token split out of every text run that contains it. Control and unknown tokens take part only
// with parse_special; user-defined ones always. A token with lstrip/rstrip eats the whitespace
// beside it.
std::vector<Tokenizer::Fragment> Tokenizer::split_special(std::string_view text, bool parse_special) const {
    std::vector<Fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({Vocab::kNone, 0, text.size()});

    // One pass over the text finds which special tokens occur at all.
    std::vector<char> present(vocab_->texts.size(), 0);
    bool any = false;
    for (size_t i = 0; i < text.size(); ++i) {
        for (int32_t id : special_by_first_byte_[static_cast<uint8_t>(text[i])]) {
            if (present[id]) continue;
            if (!parse_special && vocab_->has(id, tokenizer::kAttrControl | tokenizer::kAttrUnknown)) continue;
            if (text.compare(i, vocab_->texts[id].size(), vocab_->texts[id]) == 0) present[id] = any = true;
        }
    }
    if (!any) return fragments;

    auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    for (int32_t id : vocab_->special_ids) {
        if (!present[id]) continue;
        const std::string& t = vocab_->texts[id];
        const bool lstrip = vocab_->has(id, tokenizer::kAttrLStrip);
        const bool rstrip = vocab_->has(id, tokenizer::kAttrRStrip);
        std::vector<Fragment> next;
        next.reserve(fragments.size() + 4);
        for (const Fragment& f : fragments) {
            if (f.token != Vocab::kNone) {
                next.push_back(f);
                continue;
            }
            size_t begin = f.offset;
            const size_t end = f.offset + f.size;
            while (begin < end) {
                const size_t match = text.substr(0, end).find(t, begin);
                if (match == std::string_view::npos) break;
                size_t left_end = match;
                if (lstrip) {
                    while (left_end > begin && is_space(text[left_end - 1])) --left_end;
                }
                if (left_end > begin) next.push_back({Vocab::kNone, begin, left_end - begin});
                next.push_back({id, match, t.size()});
                begin = match + t.size();
                if (rstrip) {
                    while (begin < end && is_space(text[begin])) ++begin;
                }
            }
            if (begin < end) next.push_back({Vocab::kNone, begin, end - begin});
        }
        fragments = std::move(next);
    }
    return fragments;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    if (add_special && vocab_->add_bos && vocab_->bos != Vocab::kNone) out.push_back(vocab_->bos);
    for (const Fragment& f : split_special(text, parse_special)) {
        if (f.token != Vocab::kNone) {
            out.push_back(f.token);
        } else {
            encoder_->encode(text.substr(f.offset, f.size), out);
        }
    }
    if (add_special && vocab_->add_eos && vocab_->eos != Vocab::kNone) out.push_back(vocab_->eos);
    return out;
}

std::string Tokenizer::piece(int32_t id, bool render_special) const {
    if (!vocab_->valid(id)) {
        throw std::out_of_range("token id " + std::to_string(id) + " outside the vocabulary of " +
                                std::to_string(vocab_->n_tokens()));
    }
    const std::string& text = vocab_->texts[id];
    const uint32_t attr = vocab_->attrs[id];
    if (attr & (tokenizer::kAttrControl | tokenizer::kAttrUnknown)) return render_special ? text : std::string();
    if (attr & tokenizer::kAttrUserDefined) return text;
    if (attr & tokenizer::kAttrNormal) {
        if (vocab_->byte_level) return tokenizer::byte_level_decode(text);
        if (vocab_->escape_whitespace) return tokenizer::unescape_spaces(text);
        return text;
    }
    if (attr & tokenizer::kAttrByte) {
        // "<0xNN>"
        if (text.size() == 6 && text.starts_with("<0x")) {
            return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
        }
        return text;
    }
    return {};  // unused or undefined tokens print nothing
}

namespace {

// clean_up_tokenization_spaces, in llama.cpp's three passes.
std::string clean_up_spaces(const std::string& s) {
    std::string a;
    for (size_t i = 0; i < s.size(); ++i) {
        const char x = s[i];
        if (i > 0 && s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') && !a.empty()) a.pop_back();
        a += x;
    }
    std::string b;
    for (size_t i = 0; i < a.size(); ++i) {
        const char x = a[i];
        if (x == '\'' && i > 0 && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
            b.pop_back();  // " ' " -> "'"
            b += x;
            ++i;
            continue;
        }
        b += x;
    }
    std::string c;
    for (size_t i = 0; i < b.size(); ++i) {
        const char x = b[i];
        if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
            const char x1 = b[i + 1];
            const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
            if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c.pop_back();
        }
        c += x;
    }
    return c;
}

}  // namespace

std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
    bool strip_space = vocab_->add_space_prefix;
    if (options.remove_special && vocab_->add_bos && !ids.empty() && ids.front() == vocab_->bos) {
        strip_space = false;
        ids = ids.subspan(1);
    }
    if (options.remove_special && vocab_->add_eos && !ids.empty() && ids.back() == vocab_->eos) {
        ids = ids.first(ids.size() - 1);
    }
    std::string out;
    for (int32_t id : ids) {
        std::string p = piece(id, options.render_special);
        if (strip_space && !p.empty() && p.front() == ' ') p.erase(0, 1);
        strip_space = false;
        out += p;
    }
    if (options.clean_spaces && vocab_->clean_spaces) out = clean_up_spaces(out);
    return out;
}

const std::string& Tokenizer::token_text(int32_t id) const { return vocab_->texts.at(id); }

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
    const int32_t id = vocab_->find(text);
    return id == Vocab::kNone ? std::nullopt : std::optional<int32_t>(id);
}

namespace {
std::optional<int32_t> opt_id(int32_t id) { return id == Vocab::kNone ? std::nullopt : std::optional<int32_t>(id); }
}  // namespace

int32_t Tokenizer::n_vocab() const { return vocab_->n_tokens(); }
std::optional<int32_t> Tokenizer::bos() const { return opt_id(vocab_->bos); }
std::optional<int32_t> Tokenizer::eos() const { return opt_id(vocab_->eos); }
std::optional<int32_t> Tokenizer::eot() const { return opt_id(vocab_->eot); }
bool Tokenizer::add_bos() const { return vocab_->add_bos; }
bool Tokenizer::add_eos() const { return vocab_->add_eos; }
bool Tokenizer::is_eog(int32_t id) const {
    return std::binary_search(vocab_->eog_ids.begin(), vocab_->eog_ids.end(), id);
}
bool Tokenizer::is_control(int32_t id) const { return vocab_->valid(id) && vocab_->has(id, tokenizer::kAttrControl); }
std::span<const int32_t> Tokenizer::eog_ids() const { return vocab_->eog_ids; }
std::string_view Tokenizer::kind() const { return kind_; }

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string StreamDecoder::push(int32_t id) {
    pending_ += tokenizer_.piece(id, render_special_);
    const size_t keep = tokenizer::incomplete_utf8_tail(pending_);
    std::string out = tokenizer::sanitize_utf8(std::string_view(pending_).substr(0, pending_.size() - keep));
    pending_.erase(0, pending_.size() - keep);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out = tokenizer::sanitize_utf8(pending_);
    pending_.clear();
    return out;
}

}  // namespace deskside::models
