// The byte-level BPE ("gpt2") vocabulary llama.cpp's converter writes for a Hugging Face checkpoint
// whose tokenizer is a tokenizer.json without a tokenizer.model (Llama 3, Qwen 2/3, GPT-OSS ...):
// ModelBase.get_vocab_base (tokens and types by id), get_vocab_base_pre (the pre-tokenizer's name,
// found by hashing the ids of a fixed text) and the merges gguf-py's SpecialVocab(load_merges=True)
// reads. The special token ids, add_bos/add_eos and the chat template are hf_gguf_metadata's, as
// for SentencePiece vocabularies.
// ref: llama.cpp conversion/base.py (get_vocab_base, get_vocab_base_pre, _set_vocab_gpt2),
//      gguf-py gguf/vocab.py (SpecialVocab._try_load_from_tokenizer_json)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deskside::models {

class Tokenizer;

// llama.cpp's token types, which are SentencePiece's piece types (tokenizer.ggml.token_type).
enum HfTokenType : int32_t {
    kTokenNormal = 1,
    kTokenUnknown = 2,
    kTokenControl = 3,
    kTokenUserDefined = 4,
    kTokenUnused = 5,
    kTokenByte = 6
};

// Added tokens some checkpoints leave unmarked that the converter types as control anyway
// (ModelBase.does_token_look_special): <pad>, <|...|>, <unusedN> ...
bool looks_like_control_token(std::string_view text);

struct HfBpeVocab {
    std::string pre;                  // tokenizer.ggml.pre
    std::vector<std::string> tokens;  // by id, "[PAD<id>]" where the tokenizer has no token
    std::vector<int32_t> types;       // HfTokenType per token
    std::vector<std::string> merges;  // "left right", in rank order
};

// The converter's test text for naming a pre-tokenizer (chktxt), and the hash of the ids
// `tokenizer` gives for it with its special tokens (BOS) added: sha256 of Python's str() of the
// id list, as 64 lowercase hex digits.
std::string_view bpe_check_text();
std::string bpe_check_hash(const Tokenizer& tokenizer);
// The tokenizer.ggml.pre the converter writes for a hash, or nullopt for one it does not know.
std::optional<std::string> bpe_pre_name(std::string_view hash);

// Reads dir/tokenizer.json (a byte-level BPE model) and names its pre-tokenizer by tokenizing the
// test text with deskside's tokenizer of the directory (which runs the file's own pre-tokenizer,
// as Hugging Face's does). `vocab_size` is config.json's; without one, the tokenizer's token
// count. Throws HfCheckpointError naming the file: for a hash llama.cpp does not know (it names
// the hash), a token id at or past vocab_size, or a tokenizer deskside cannot run.
HfBpeVocab read_hf_bpe_vocab(const std::string& dir, std::optional<int64_t> vocab_size);

}  // namespace deskside::models
