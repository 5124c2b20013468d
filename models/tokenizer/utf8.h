// UTF-8 helpers and GPT-2's byte <-> unicode mapping, shared by the tokenizers and the
// streaming decoder.
//
// Byte-level BPE vocabularies (GPT-2 and every model that copied its tokenizer) store each raw
// byte as a printable code point: the printable Latin-1 bytes map to themselves and the other
// 68 bytes to U+0100.. in byte order. Tokens and merges are strings of those code points.
// ref: https://github.com/openai/gpt-2/blob/master/src/encoder.py (bytes_to_unicode)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deskside::models::tokenizer {

// The length of the UTF-8 sequence that `lead` starts, judged from the lead byte alone (1 for a
// stray continuation byte), as tokenizers split text into symbols.
inline size_t utf8_sequence_length(uint8_t lead) {
    if (lead < 0xC0) return 1;
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    return 4;
}

void append_utf8(std::string& out, uint32_t cp);

// Decodes one well-formed code point at `pos` (advancing it); nullopt for an invalid or
// truncated sequence (pos is then left unchanged).
std::optional<uint32_t> decode_utf8(std::string_view s, size_t& pos);

// `text` with every ill-formed byte replaced by U+FFFD, so that a UTF-mode regex can run on it.
std::string sanitize_utf8(std::string_view text);

// How many bytes at the end of `s` begin a UTF-8 sequence that is not complete yet (0 when
// the text ends on a sequence boundary or with bytes that can never complete).
size_t incomplete_utf8_tail(std::string_view s);

// GPT-2 byte-level encoding of arbitrary bytes, and its inverse. A code point of `encoded` that
// is not one of the 256 byte symbols (added tokens are stored as plain text) passes through.
std::string byte_level_encode(std::string_view bytes);
std::string byte_level_decode(std::string_view encoded);

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space.
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";
std::string escape_spaces(std::string_view text);    // ' ' -> U+2581
std::string unescape_spaces(std::string_view text);  // U+2581 -> ' '

}  // namespace deskside::models::tokenizer
