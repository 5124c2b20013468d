// The encoders behind Tokenizer: each turns one run of plain text (special tokens are already
// cut out by Tokenizer) into token ids. Private to models/tokenizer/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer/vocab.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace deskside::models::tokenizer {

class Encoder {
   public:
    virtual ~Encoder() = default;
    // Appends the ids of `text` to `out`. `text` starts the input or follows a special token.
    virtual void encode(std::string_view text, std::vector<int32_t>& out) const = 0;
};

// How a BPE vocabulary cuts text into words before merging.
struct PreTokenizerSpec {
    std::vector<std::string> patterns;  // applied in order (see RegexSplitter)
    bool byte_level = true;             // words are GPT-2 byte-level encoded before merging
    bool escape_whitespace = false;     // spaces become U+2581 before splitting (Gemma 4)
    bool ignore_merges = false;
    bool clean_spaces = true;
    bool add_bos = false;               // the default before tokenizer.ggml.add_bos_token
};

// The spec llama.cpp uses for a GGUF tokenizer.ggml.pre name (empty = "default"). Throws
// std::runtime_error for a name it does not know.
PreTokenizerSpec pretokenizer_for_gguf(std::string_view pre);

// GPT-2's own pattern, also what Hugging Face's ByteLevel pre-tokenizer applies with use_regex.
extern const char* const kGpt2Pattern;

// SentencePiece BPE over the vocabulary's scores, with <0xNN> byte fallback (llama.cpp's
// "SPM" tokenizer): adds the space prefix when the vocabulary asks, escapes spaces.
std::unique_ptr<Encoder> make_spm_encoder(const Vocab& vocab);

// Ranked-merge BPE after regex pre-tokenization.
std::unique_ptr<Encoder> make_bpe_encoder(const Vocab& vocab, const PreTokenizerSpec& spec);

// libsentencepiece's own encoder for a tokenizer.model file.
std::unique_ptr<Encoder> make_sentencepiece_encoder(std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp);

}  // namespace deskside::models::tokenizer
