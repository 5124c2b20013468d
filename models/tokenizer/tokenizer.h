// Text <-> token ids for every model deskside loads, tokenizing exactly as llama.cpp does.
//
// Sources: the tokenizer.ggml.* metadata of a GGUF file (SentencePiece "llama" vocabularies,
// byte-level BPE "gpt2" ones with the pre-tokenizer named by tokenizer.ggml.pre, and Gemma 4's
// "gemma4"), a Hugging Face directory (tokenizer.json with a byte-level BPE model, or
// tokenizer.model through libsentencepiece, plus tokenizer_config.json), or a bare
// SentencePiece .model file. WordPiece (BERT) and Unigram (T5) vocabularies are not supported.
//
// Special tokens: control tokens (<|im_start|>, <start_of_turn>, <|eot_id|> ...) are recognised
// in text only with parse_special = true (chat templates); otherwise they are plain text.
// User-defined tokens are always recognised, as Hugging Face and llama.cpp do.
//
// A Tokenizer is immutable after loading; encode/decode may run on many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace deskside::models {

class GgufFile;

namespace tokenizer {
struct Vocab;
class Encoder;
}  // namespace tokenizer

// A tokenizer file that cannot be used: the message names the file and the field.
class TokenizerError : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

struct DecodeOptions {
    // Print control tokens (BOS, <|im_end|> ...) as their text instead of nothing.
    bool render_special = false;
    // Drop a leading BOS / trailing EOS that the model adds by itself (llama.cpp remove_special).
    bool remove_special = false;
    // Apply the model's clean_up_tokenization_spaces (" ," -> ","...) when it asks for it.
    bool clean_spaces = true;
};

class Tokenizer {
   public:
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
    static std::unique_ptr<Tokenizer> from_hf_dir(const std::string& dir);
    static std::unique_ptr<Tokenizer> from_sentencepiece(const std::string& model_path);
    // A GGUF file, a Hugging Face directory (or its tokenizer.json), or a SentencePiece .model.
    static std::unique_ptr<Tokenizer> load(const std::string& path);

    ~Tokenizer();
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    // add_special: add BOS / EOS where the model asks for them (add_bos_token/add_eos_token).
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

    // Concatenated pieces, as llama.cpp's llama_detokenize: with a space-prefix vocabulary
    // (SentencePiece) the first piece loses one leading space unless the sequence starts with
    // BOS, so decode(encode(x)) == x (for valid UTF-8 x, and with clean_spaces off where the
    // model asks for clean-up).
    std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

    // The bytes one token stands for (may be part of a UTF-8 sequence). Control tokens give ""
    // unless render_special. Throws std::out_of_range for an id outside the vocabulary.
    std::string piece(int32_t id, bool render_special = false) const;
    // The token's text as stored in the vocabulary ("▁Hello", "Ġworld", "<0x0A>").
    const std::string& token_text(int32_t id) const;
    std::optional<int32_t> find_token(std::string_view text) const;

    int32_t n_vocab() const;
    std::optional<int32_t> bos() const;
    std::optional<int32_t> eos() const;
    std::optional<int32_t> eot() const;
    bool add_bos() const;
    bool add_eos() const;
    bool is_eog(int32_t id) const;               // ends generation (EOS, EOT, <|im_end|> ...)
    bool is_control(int32_t id) const;
    std::span<const int32_t> eog_ids() const;
    std::string_view kind() const;  // "spm", "bpe" or "sentencepiece"

   private:
    Tokenizer(std::unique_ptr<tokenizer::Vocab> vocab, std::string kind);
    static std::unique_ptr<Tokenizer> from_hf_files(const std::string& dir);
    // Encoders keep a reference to the vocabulary, so they are made after it has its place.
    void set_encoder(std::unique_ptr<tokenizer::Encoder> encoder);
    struct Fragment;
    std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;

    std::unique_ptr<tokenizer::Vocab> vocab_;
    std::unique_ptr<tokenizer::Encoder> encoder_;
    std::string kind_;
    std::vector<std::vector<int32_t>> special_by_first_byte_;  // candidates for the special-token scan
};

// Turns a stream of generated token ids into text that is always valid UTF-8: bytes of a piece
// that end inside a UTF-8 sequence are held back until a later token completes it. Pieces are
// taken whole (no leading-space removal), as llama.cpp streams them.
class StreamDecoder {
   public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = false);

    // The text that became complete with this token (possibly empty).
    std::string push(int32_t id);
    // Whatever is still held back, as U+FFFD replacement characters (end of the stream).
    std::string flush();
    bool has_pending() const { return !pending_.empty(); }

   private:
    const Tokenizer& tokenizer_;
    bool render_special_;
    std::string pending_;
};

}  // namespace deskside::models
