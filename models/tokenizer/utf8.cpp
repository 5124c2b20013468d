#include "models/tokenizer/utf8.h"

#include <array>

namespace deskside::models::tokenizer {

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::optional<uint32_t> decode_utf8(std::string_view s, size_t& pos) {
    const auto b0 = static_cast<uint8_t>(s[pos]);
    if (b0 < 0x80) {
        ++pos;
        return b0;
    }
    size_t n;
    uint32_t cp;
    uint32_t min;
    if ((b0 & 0xE0) == 0xC0) {
        n = 2, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        n = 3, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        n = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
        return std::nullopt;
    }
    if (pos + n > s.size()) return std::nullopt;
    for (size_t i = 1; i < n; ++i) {
        const auto b = static_cast<uint8_t>(s[pos + i]);
        if ((b & 0xC0) != 0x80) return std::nullopt;
        cp = (cp << 6) | (b & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are ill-formed (RFC 3629).
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
    pos += n;
    return cp;
}

std::string sanitize_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t start = pos;
        if (decode_utf8(text, pos)) {
            out.append(text.substr(start, pos - start));
        } else {
            out += "\xEF\xBF\xBD";
            ++pos;
        }
    }
    return out;
}

size_t incomplete_utf8_tail(std::string_view s) {
    // A sequence is at most 4 bytes, so only the last 3 bytes can start an unfinished one.
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const auto b = static_cast<uint8_t>(s[n - back]);
        if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
        if (b < 0xC0 || b >= 0xF8) return 0;
        return utf8_sequence_length(b) > back ? back : 0;
    }
    return 0;
}

namespace {

struct ByteLevelTables {
    std::array<uint32_t, 256> byte_to_cp{};
    std::array<int16_t, 512> cp_to_byte{};  // every symbol is below U+0200; -1 = not a symbol

    ByteLevelTables() {
        cp_to_byte.fill(-1);
        uint32_t next = 256;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            byte_to_cp[b] = printable ? b : next++;
            cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};

const ByteLevelTables& byte_level_tables() {
    static const ByteLevelTables kTables;
    return kTables;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
    const auto& t = byte_level_tables();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) append_utf8(out, t.byte_to_cp[static_cast<uint8_t>(c)]);
    return out;
}

std::string byte_level_decode(std::string_view encoded) {
    const auto& t = byte_level_tables();
    std::string out;
    out.reserve(encoded.size());
    size_t pos = 0;
    while (pos < encoded.size()) {
        const size_t start = pos;
        const auto cp = decode_utf8(encoded, pos);
        if (!cp) {
            out += encoded[pos++];
        } else if (*cp < t.cp_to_byte.size() && t.cp_to_byte[*cp] >= 0) {
            out += static_cast<char>(t.cp_to_byte[*cp]);
        } else {
            out.append(encoded.substr(start, pos - start));
        }
    }
    return out;
}

std::string escape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size() + text.size() / 4);
    for (char c : text) {
        if (c == ' ') {
            out += kSpmSpace;
        } else {
            out += c;
        }
    }
    return out;
}

std::string unescape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        if (text.compare(pos, kSpmSpace.size(), kSpmSpace) == 0) {
            out += ' ';
            pos += kSpmSpace.size();
        } else {
            out += text[pos++];
        }
    }
    return out;
}

}  // namespace deskside::models::tokenizer
