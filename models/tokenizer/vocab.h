// The vocabulary shared by every tokenizer kind: token texts, scores, attributes, merges,
// special token ids and the flags that steer encoding and decoding. Loaders (GGUF metadata,
// tokenizer.json, tokenizer.model) fill one and call finalize(); encoders and the decoder read
// it. Private to models/tokenizer/.
//
// The rules here follow llama.cpp's vocabulary loader (src/llama-vocab.cpp), which is the
// reference the vocab test vectors were checked against: which tokens end generation, which
// tokens are matched in raw text before the tokenizer runs, default BOS/EOS per kind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deskside::models::tokenizer {

// Token attributes, a bit set (GGUF stores one token_type per token; see attr_from_token_type).
inline constexpr uint32_t kAttrNormal = 1u << 0;
inline constexpr uint32_t kAttrUnknown = 1u << 1;
inline constexpr uint32_t kAttrControl = 1u << 2;
inline constexpr uint32_t kAttrUserDefined = 1u << 3;
inline constexpr uint32_t kAttrUnused = 1u << 4;
inline constexpr uint32_t kAttrByte = 1u << 5;
inline constexpr uint32_t kAttrLStrip = 1u << 6;  // eat whitespace before the token in text
inline constexpr uint32_t kAttrRStrip = 1u << 7;  // eat whitespace after it

// GGUF tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused,
// 6 byte; anything else is kept as "undefined" (no attribute).
uint32_t attr_from_token_type(int64_t type);

enum class VocabKind {
    Spm,  // SentencePiece BPE: merges chosen by token score, <0xNN> byte fallback
    Bpe,  // ranked merges (byte-level GPT-2 style, or raw UTF-8 with U+2581 spaces for Gemma 4)
};

// A hash that lets unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

// uint64 -> int32 by open addressing with linear probing. Merge look-ups are the hot path of
// BPE; a flat table keeps each to about one cache miss.
class PairTable {
   public:
    void insert(uint64_t key, int32_t value);  // keeps the first value of a key
    int32_t find(uint64_t key) const;          // -1 when absent
    void reserve(size_t n);

   private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    std::vector<uint64_t> keys_;
    std::vector<int32_t> values_;
    size_t size_ = 0;
    size_t slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
    int shift_ = 64;
};

struct Vocab {
    static constexpr int32_t kNone = -1;

    VocabKind kind = VocabKind::Spm;
    std::vector<std::string> texts;
    std::vector<float> scores;
    std::vector<uint32_t> attrs;
    StringMap<int32_t> ids;
    PairTable merge_ids;             // (left id << 32 | right id) -> rank, merges of two tokens
    StringMap<int32_t> merge_texts;  // "left right" -> rank, merges with a side that is no token

    int32_t bos = kNone, eos = kNone, eot = kNone, eom = kNone, unk = kNone, pad = kNone;
    bool add_bos = false;
    bool add_eos = false;
    bool add_space_prefix = false;    // SPM: a space before text that starts the input or follows a special token
    bool escape_whitespace = false;   // spaces are stored as U+2581 in tokens
    bool byte_level = false;          // tokens are GPT-2 byte-level strings
    bool clean_spaces = false;        // decode removes " ," " ." " 's" ... (clean_up_tokenization_spaces)
    bool ignore_merges = false;       // a pre-token that is itself a token is not merged up from chars

    std::vector<int32_t> eog_ids;      // sorted
    std::vector<int32_t> special_ids;  // control, user-defined and unknown tokens, longest text first

    int32_t n_tokens() const { return static_cast<int32_t>(texts.size()); }
    bool valid(int32_t id) const { return id >= 0 && id < n_tokens(); }
    bool has(int32_t id, uint32_t attr) const { return (attrs[id] & attr) != 0; }

    // Appends a token. Throws std::runtime_error when the text is already in the vocabulary.
    void add_token(std::string text, float score, uint32_t attr);
    int32_t find(std::string_view text) const;
    // Merge ranks, -1 when not a merge. The id form needs both sides to be tokens.
    int merge_rank(int32_t left, int32_t right) const;
    int merge_rank(std::string_view left, std::string_view right) const;
    // "left right", after all tokens are in.
    void add_merge(std::string_view merge, int rank);

    // The token of one raw byte: "<0xNN>" when the vocabulary has it (SentencePiece byte
    // fallback), else the byte-level symbol (BPE) or the byte itself as a one-char token.
    int32_t byte_token(uint8_t byte) const;

    // After all tokens and ids are in: derives the end-of-generation set and the special-token
    // list, forces control type on end-of-turn tokens, and applies the per-model strip rules.
    // `model_name` is general.name (or the checkpoint's name), used only for those rules.
    void finalize(std::string_view model_name);
};

}  // namespace deskside::models::tokenizer
