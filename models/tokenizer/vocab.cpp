#include "models/tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>

#include "models/tokenizer/utf8.h"

namespace deskside::models::tokenizer {

uint32_t attr_from_token_type(int64_t type) {
    switch (type) {
        case 1: return kAttrNormal;
        case 2: return kAttrUnknown;
        case 3: return kAttrControl;
        case 4: return kAttrUserDefined;
        case 5: return kAttrUnused;
        case 6: return kAttrByte;
        default: return 0;
    }
}

void Vocab::add_token(std::string text, float score, uint32_t attr) {
    const auto id = n_tokens();
    if (!ids.emplace(text, id).second) {
        throw std::runtime_error("duplicate token text '" + text + "' at ids " + std::to_string(ids.find(text)->second) +
                                 " and " + std::to_string(id));
    }
    texts.push_back(std::move(text));
    scores.push_back(score);
    attrs.push_back(attr);
}

int32_t Vocab::find(std::string_view text) const {
    const auto it = ids.find(text);
    return it == ids.end() ? kNone : it->second;
}

void PairTable::reserve(size_t n) {
    size_t cap = 16;
    int shift = 60;
    while (cap < 2 * n) cap *= 2, --shift;
    if (cap <= keys_.size()) return;
    std::vector<uint64_t> old_keys(cap, kEmpty);
    std::vector<int32_t> old_values(cap, -1);
    old_keys.swap(keys_);
    old_values.swap(values_);
    shift_ = shift;
    size_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i) {
        if (old_keys[i] != kEmpty) insert(old_keys[i], old_values[i]);
    }
}

void PairTable::insert(uint64_t key, int32_t value) {
    if (2 * (size_ + 1) > keys_.size()) reserve(size_ + 1);
    const size_t mask = keys_.size() - 1;
    for (size_t i = slot(key);; i = (i + 1) & mask) {
        if (keys_[i] == key) return;
        if (keys_[i] == kEmpty) {
            keys_[i] = key;
            values_[i] = value;
            ++size_;
            return;
        }
    }
}

int32_t PairTable::find(uint64_t key) const {
    if (keys_.empty()) return -1;
    const size_t mask = keys_.size() - 1;
    for (size_t i = slot(key);; i = (i + 1) & mask) {
        if (keys_[i] == key) return values_[i];
        if (keys_[i] == kEmpty) return -1;
    }
}

namespace {
uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
}  // namespace

void Vocab::add_merge(std::string_view merge, int rank) {
    // The separator is the first space after the first character (a side is never empty).
    const size_t pos = merge.find(' ', 1);
    if (pos == std::string_view::npos) return;
    const int32_t left = find(merge.substr(0, pos));
    const int32_t right = find(merge.substr(pos + 1));
    if (left != kNone && right != kNone) {
        merge_ids.insert(pair_key(left, right), rank);
    } else {
        merge_texts.emplace(std::string(merge), rank);
    }
}

int Vocab::merge_rank(int32_t left, int32_t right) const { return merge_ids.find(pair_key(left, right)); }

int Vocab::merge_rank(std::string_view left, std::string_view right) const {
    std::string key;
    key.reserve(left.size() + 1 + right.size());
    key.append(left).append(1, ' ').append(right);
    const auto it = merge_texts.find(key);
    return it == merge_texts.end() ? -1 : it->second;
}

int32_t Vocab::byte_token(uint8_t byte) const {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const char name[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
    if (const int32_t id = find(std::string_view(name, 6)); id != kNone) return id;
    if (byte_level) return find(byte_level_encode(std::string_view(reinterpret_cast<const char*>(&byte), 1)));
    return find(std::string_view(reinterpret_cast<const char*>(&byte), 1));
}

namespace {

// Texts that mark the end of a turn in the chat formats llama.cpp knows; such tokens end
// generation even when the file does not name them.
constexpr std::array<std::string_view, 11> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<end_of_utterance>",
};
// Texts of tokens that end generation, whatever the file says.
constexpr std::array<std::string_view, 22> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
};

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

}  // namespace

void Vocab::finalize(std::string_view model_name) {
    auto force_control = [&](int32_t id) { attrs[id] |= kAttrControl; };

    if (eot == kNone) {
        for (std::string_view t : kEotTexts) {
            if (const int32_t id = find(t); id != kNone) {
                eot = id;
                force_control(id);
                break;
            }
        }
    }
    if (eom == kNone) {
        if (const int32_t id = find("<|eom_id|>"); id != kNone) {
            eom = id;
            force_control(id);
        }
    }
    // Control tokens named "unused" are unused.
    for (int32_t id = 0; id < n_tokens(); ++id) {
        if (has(id, kAttrControl) && contains(texts[id], "unused")) attrs[id] |= kAttrUnused;
    }

    std::vector<int32_t> eog;
    auto add_eog = [&](int32_t id) {
        if (valid(id) && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
    };
    for (std::string_view t : kEogTexts) {
        if (const int32_t id = find(t); id != kNone) {
            add_eog(id);
            force_control(id);
        }
    }
    add_eog(eos);
    add_eog(eot);
    add_eog(eom);
    // Harmony-style formats end a message with <|end|> but a turn with <|return|>/<|call|>.
    {
        const int32_t end = find("<|end|>");
        const bool harmony = (find("<|return|>") != kNone && find("<|call|>") != kNone) ||
                             (find("<|calls|>") != kNone && find("<|flush|>") != kNone);
        if (end != kNone && harmony) {
            eog.erase(std::remove(eog.begin(), eog.end(), end), eog.end());
            attrs[end] = kAttrUserDefined;
        }
    }
    // Gemma 4 uses </s> as ordinary text.
    {
        const int32_t s = find("</s>");
        if (s != kNone && find("<|tool_response>") != kNone && std::find(eog.begin(), eog.end(), s) != eog.end()) {
            eog.erase(std::remove(eog.begin(), eog.end(), s), eog.end());
            attrs[s] = kAttrNormal;
        }
    }
    std::sort(eog.begin(), eog.end());
    eog_ids = std::move(eog);

    special_ids.clear();
    for (int32_t id = 0; id < n_tokens(); ++id) {
        if (has(id, kAttrControl | kAttrUserDefined | kAttrUnknown)) special_ids.push_back(id);
    }
    std::stable_sort(special_ids.begin(), special_ids.end(),
                     [&](int32_t a, int32_t b) { return texts[a].size() > texts[b].size(); });

    // Per-model strip rules that the files do not record (llama.cpp sets the same).
    std::string name(model_name);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (contains(name, "phi-3") || contains(name, "phi3")) {
        for (int32_t id : special_ids) attrs[id] |= kAttrRStrip;
        if (const int32_t id = find("</s>"); id != kNone) attrs[id] |= kAttrRStrip;
        for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) {
            if (const int32_t id = find(t); id != kNone) attrs[id] &= ~kAttrRStrip;
        }
    }
}

}  // namespace deskside::models::tokenizer
