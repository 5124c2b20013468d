#include "models/chat_template/unicode.h"

namespace deskside::models::jinja {

std::u32string utf8_decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) {  // not UTF-8: keep the byte as U+FFFD, as decode(errors="replace")
            out.push_back(0xFFFD);
            ++i;
            continue;
        }
        char32_t cp = n == 1 ? c : c & (0x7F >> n);
        for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        out.push_back(cp);
        i += n;
    }
    return out;
}

void utf8_append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string utf8_encode(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t cp : s) utf8_append(out, cp);
    return out;
}

size_t utf8_length(std::string_view s) {
    size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

bool is_space(char32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

bool is_printable(char32_t cp) {
    if (cp == ' ') return true;
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
    if (is_space(cp)) return false;                                        // Zs, Zl, Zp
    if ((cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E)) return false;  // Cf
    if ((cp >= 0x2060 && cp <= 0x206F) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB)) return false;
    if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0xE000 && cp <= 0xF8FF)) return false;  // Cs, Co
    return cp <= 0x10FFFF;
}

// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic, which is what
// role names and tool schemas in practice contain.
char32_t to_upper(char32_t cp) {
    if (cp >= 'a' && cp <= 'z') return cp - 32;
    if (cp < 0x80) return cp;
    if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)) return cp - 32;
    if (cp == 0xFF) return 0x178;
    if (cp >= 0x100 && cp <= 0x17F && cp != 0x130 && cp != 0x131 && cp != 0x138 && cp != 0x149) {
        const bool odd_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
        if (odd_upper) return (cp % 2 == 0) ? cp - 1 : cp;
        return (cp % 2 == 1) ? cp - 1 : cp;
    }
    if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 32;
    if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
    if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
    return cp;
}

char32_t to_lower(char32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + 32;
    if (cp < 0x80) return cp;
    if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 32;
    if (cp == 0x178) return 0xFF;
    if (cp >= 0x100 && cp <= 0x17F && cp != 0x130 && cp != 0x131 && cp != 0x138 && cp != 0x149) {
        const bool odd_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
        if (odd_upper) return (cp % 2 == 1) ? cp + 1 : cp;
        return (cp % 2 == 0) ? cp + 1 : cp;
    }
    if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
    return cp;
}

bool is_upper(char32_t cp) { return to_lower(cp) != cp; }
bool is_lower(char32_t cp) { return to_upper(cp) != cp || cp == 0xDF; }
bool is_alpha(char32_t cp) {
    return is_upper(cp) || is_lower(cp) || (cp > 0x7F && !is_space(cp) && is_printable(cp) && cp >= 0x4E00);
}

std::string str_upper(std::string_view s) {
    std::string out;
    for (char32_t cp : utf8_decode(s)) {
        if (cp == 0xDF) {
            out += "SS";
            continue;
        }
        utf8_append(out, to_upper(cp));
    }
    return out;
}

std::string str_lower(std::string_view s) {
    std::string out;
    for (char32_t cp : utf8_decode(s)) utf8_append(out, to_lower(cp));
    return out;
}

std::string str_strip(std::string_view s, const std::string* chars, StripSide side) {
    const std::u32string u = utf8_decode(s);
    const std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
    auto strip_it = [&](char32_t cp) { return chars ? set.find(cp) != std::u32string::npos : is_space(cp); };
    size_t b = 0, e = u.size();
    if (side != StripSide::kRight)
        while (b < e && strip_it(u[b])) ++b;
    if (side != StripSide::kLeft)
        while (e > b && strip_it(u[e - 1])) --e;
    return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

}  // namespace deskside::models::jinja
