// JSON Schema `pattern` -> grammar for a JSON string whose decoded value the regular expression
// matches. ref: ECMA-262 RegExp syntax; JSON Schema validation 6.3.3 (patterns are not anchored).
//
// The subset: literal characters (UTF-8 included), escaped punctuation, \d \D \w \W, \t \n \r \f \v,
// \xHH, \uXXXX, `.`, classes [...] / [^...] of ASCII characters, ranges and \d \w \D \W, groups
// (...) and (?:...), alternation, the quantifiers * + ? {n} {n,} {n,m} (lazy ones too: the language
// is the same), and ^ / $ at the start / end of a top-level alternative. Anything else (\s, \b,
// back-references, look-around, non-ASCII in classes, anchors elsewhere) is a SchemaError.
//
// The pattern runs over the decoded string, the grammar over its JSON encoding, so each character a
// pattern element allows is written in one canonical form: itself when printable, \" and \\, the short
// escapes, \u00XX for other control characters. An alternative without ^ / $ gets any characters
// before / after it.
#include <string>

#include "engine/json_schema.h"

namespace deskside::engine {

using Rule = GrammarBuilder::Rule;

namespace {

// A set of characters: ASCII ones by bit, and either all non-ASCII ones or none (`.` leaves out
// the line separators U+2028 and U+2029).
struct CharSet {
    std::bitset<128> ascii;
    bool non_ascii = false;
    bool except_line_separators = false;

    CharSet& operator|=(const CharSet& o) {
        ascii |= o.ascii;
        non_ascii |= o.non_ascii;
        return *this;
    }
    CharSet complement() const {
        CharSet c;
        c.ascii = ~ascii;
        c.non_ascii = !non_ascii;
        return c;
    }
};

CharSet ascii_range(int lo, int hi) {
    CharSet s;
    for (int c = lo; c <= hi; ++c) s.ascii.set(c);
    return s;
}

CharSet digit_set() { return ascii_range('0', '9'); }

CharSet word_set() {
    CharSet s = ascii_range('0', '9');
    s |= ascii_range('a', 'z');
    s |= ascii_range('A', 'Z');
    s.ascii.set('_');
    return s;
}

class RegexCompiler {
   public:
    RegexCompiler(GrammarBuilder& b, const std::string& pattern, const std::string& path)
        : b_(b), re_(pattern), path_(path) {}

    Rule compile() {
        const Rule any = b_.repeat(json_string_char(b_), 0, -1);
        std::vector<Rule> alts;
        do {
            bool start = false, end = false;
            if (peek('^')) {
                ++pos_;
                start = true;
            }
            std::vector<Rule> seq;
            if (!start) seq.push_back(any);
            seq.push_back(concat(0));
            if (peek('$')) {
                ++pos_;
                end = true;
            }
            if (!end) seq.push_back(any);
            alts.push_back(b_.sequence(std::move(seq)));
        } while (eat('|'));
        if (pos_ != re_.size()) fail("unexpected '" + std::string(1, re_[pos_]) + "'");
        return b_.sequence({b_.literal("\""), b_.choice(std::move(alts)), b_.literal("\"")});
    }

   private:
    [[noreturn]] void fail(const std::string& why) const {
        throw SchemaError(path_, "pattern",
                          "pattern /" + re_ + "/: " + why + " (at offset " + std::to_string(pos_) + ")");
    }
    bool peek(char c) const { return pos_ < re_.size() && re_[pos_] == c; }
    bool eat(char c) {
        if (!peek(c)) return false;
        ++pos_;
        return true;
    }

    Rule alternation(int depth) {
        std::vector<Rule> alts{concat(depth)};
        while (eat('|')) alts.push_back(concat(depth));
        return b_.choice(std::move(alts));
    }

    Rule concat(int depth) {
        std::vector<Rule> seq{b_.literal("")};
        while (pos_ < re_.size() && !peek('|') && !peek(')')) {
            if (peek('$')) {
                const bool last = pos_ + 1 == re_.size() || re_[pos_ + 1] == '|';
                if (depth == 0 && last) break;
                fail("'$' is supported only at the end of a top-level alternative");
            }
            if (peek('^')) fail("'^' is supported only at the start of a top-level alternative");
            seq.push_back(quantified(depth));
        }
        return b_.sequence(std::move(seq));
    }

    Rule quantified(int depth) {
        const Rule atom_rule = atom(depth);
        int64_t min = 1, max = 1;
        if (eat('*')) {
            min = 0, max = -1;
        } else if (eat('+')) {
            min = 1, max = -1;
        } else if (eat('?')) {
            min = 0, max = 1;
        } else if (peek('{')) {
            const size_t save = pos_++;
            const auto number = [&]() -> std::optional<int64_t> {
                size_t start = pos_;
                while (pos_ < re_.size() && std::isdigit(static_cast<unsigned char>(re_[pos_]))) ++pos_;
                if (pos_ == start || pos_ - start > 6) return std::nullopt;
                return std::stoll(re_.substr(start, pos_ - start));
            };
            const auto lo = number();
            if (!lo) {
                pos_ = save;
                fail("'{' must start a quantifier {n}, {n,} or {n,m}");
            }
            min = max = *lo;
            if (eat(',')) {
                const auto hi = number();
                max = hi ? *hi : -1;
            }
            if (!eat('}')) fail("unterminated quantifier");
            if (max >= 0 && max < min) fail("quantifier {n,m} with m < n");
        } else {
            return atom_rule;
        }
        eat('?');  // lazy: same language
        if (peek('*') || peek('+') || peek('?') || peek('{')) fail("nested quantifier");
        return b_.repeat(atom_rule, min, max);
    }

    Rule atom(int depth) {
        const char c = re_[pos_++];
        switch (c) {
            case '(': {
                if (eat('?')) {
                    if (!eat(':')) fail("only (?:...) groups are supported (no look-around or named groups)");
                }
                const Rule inner = alternation(depth + 1);
                if (!eat(')')) fail("unbalanced '('");
                return inner;
            }
            case '[': return chars(char_class());
            case '.': {
                CharSet dot = ascii_range(0, 127);
                dot.ascii.reset('\n');
                dot.ascii.reset('\r');
                dot.non_ascii = true;
                dot.except_line_separators = true;
                return chars(dot);
            }
            case '\\': return escape_atom();
            case '*':
            case '+':
            case '?':
            case '{':
            case ')':
            case ']':
            case '}': fail("unexpected '" + std::string(1, c) + "'");
            default: break;
        }
        const unsigned char u = static_cast<unsigned char>(c);
        if (u < 0x80) return chars(ascii_range(u, u));
        // A UTF-8 sequence stands for itself.
        size_t n = u >= 0xf0 ? 4 : u >= 0xe0 ? 3 : 2;
        if (pos_ - 1 + n > re_.size()) fail("malformed UTF-8");
        const std::string seq = re_.substr(pos_ - 1, n);
        pos_ += n - 1;
        return b_.literal(seq);
    }

    // The characters an escape stands for (in a class, \b is the backspace).
    CharSet escape_set(bool in_class) {
        if (pos_ >= re_.size()) fail("trailing backslash");
        const char e = re_[pos_++];
        switch (e) {
            case 'd': return digit_set();
            case 'D': return digit_set().complement();
            case 'w': return word_set();
            case 'W': return word_set().complement();
            case 't': return ascii_range('\t', '\t');
            case 'n': return ascii_range('\n', '\n');
            case 'r': return ascii_range('\r', '\r');
            case 'f': return ascii_range('\f', '\f');
            case 'v': return ascii_range('\v', '\v');
            case 'x':
            case 'u': {
                const size_t n = e == 'x' ? 2 : 4;
                if (pos_ + n > re_.size()) fail("short \\" + std::string(1, e) + " escape");
                const int v = std::stoi(re_.substr(pos_, n), nullptr, 16);
                pos_ += n;
                if (v >= 0x80) fail("\\" + std::string(1, e) + " escapes beyond ASCII are not supported");
                return ascii_range(v, v);
            }
            default: break;
        }
        if (e == 'b' && in_class) return ascii_range('\b', '\b');
        if (std::ispunct(static_cast<unsigned char>(e))) return ascii_range(e, e);
        --pos_;
        fail("escape \\" + std::string(1, e) + " is not supported");
    }

    Rule escape_atom() { return chars(escape_set(false)); }

    // The body of [...] after the '['.
    CharSet char_class() {
        const bool negated = eat('^');
        CharSet set;
        while (pos_ < re_.size() && !peek(']')) {           // ECMA: [] matches nothing, [^] anything
            const auto one = [&]() -> std::optional<int> {  // a single ASCII character, or a shorthand set
                const unsigned char c = static_cast<unsigned char>(re_[pos_]);
                if (c >= 0x80) fail("non-ASCII characters in a class are not supported");
                if (c != '\\') {
                    ++pos_;
                    return c;
                }
                ++pos_;
                const CharSet s = escape_set(true);
                if (s.ascii.count() == 1 && !s.non_ascii) {
                    for (int i = 0; i < 128; ++i) {
                        if (s.ascii[i]) return i;
                    }
                }
                set |= s;
                return std::nullopt;
            };
            const auto lo = one();
            if (!lo) continue;
            if (peek('-') && pos_ + 1 < re_.size() && re_[pos_ + 1] != ']') {
                ++pos_;
                const auto hi = one();
                if (!hi || *hi < *lo) fail("bad range in a class");
                set |= ascii_range(*lo, *hi);
            } else {
                set |= ascii_range(*lo, *lo);
            }
        }
        if (!eat(']')) fail("unterminated class");
        return negated ? set.complement() : set;
    }

    // One character of the set, in its canonical JSON encoding.
    Rule chars(const CharSet& set) {
        std::vector<Rule> alts;
        std::bitset<256> raw;
        static const char* const kShort[] = {"\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004",
                                             "\\u0005", "\\u0006", "\\u0007", "\\b",     "\\t",
                                             "\\n",     "\\u000b", "\\f",     "\\r"};
        for (int c = 0; c < 128; ++c) {
            if (!set.ascii[c]) continue;
            if (c == '"') {
                alts.push_back(b_.literal("\\\""));
            } else if (c == '\\') {
                alts.push_back(b_.literal("\\\\"));
            } else if (c < 0x20) {
                if (c < 14) {
                    alts.push_back(b_.literal(kShort[c]));
                } else {
                    static const char* const kHex = "0123456789abcdef";
                    alts.push_back(b_.literal(std::string("\\u00") + kHex[c >> 4] + kHex[c & 15]));
                }
            } else {
                raw.set(c);
            }
        }
        if (raw.any()) alts.push_back(b_.byte_set(raw));
        if (set.non_ascii)
            alts.push_back(set.except_line_separators ? non_ascii_but_line_separators() : utf8_multibyte(b_));
        if (alts.empty()) fail("a class that matches no character");
        return b_.choice(std::move(alts));
    }

    // Well-formed UTF-8 of two to four bytes except E2 80 A8 / E2 80 A9 (U+2028, U+2029).
    Rule non_ascii_but_line_separators() {
        const Rule cont = b_.byte_range(0x80, 0xbf);
        std::bitset<256> after_e2_80;
        for (int c = 0x80; c <= 0xbf; ++c) after_e2_80.set(c);
        after_e2_80.reset(0xa8);
        after_e2_80.reset(0xa9);
        return b_.choice({
            b_.sequence({b_.byte_range(0xc2, 0xdf), cont}),
            b_.sequence({b_.literal("\xe0"), b_.byte_range(0xa0, 0xbf), cont}),
            b_.sequence({b_.byte_range(0xe1, 0xe1), cont, cont}),
            b_.sequence({b_.literal("\xe2\x80"), b_.byte_set(after_e2_80)}),
            b_.sequence({b_.literal("\xe2"), b_.byte_range(0x81, 0xbf), cont}),
            b_.sequence({b_.byte_range(0xe3, 0xec), cont, cont}),
            b_.sequence({b_.literal("\xed"), b_.byte_range(0x80, 0x9f), cont}),
            b_.sequence({b_.byte_range(0xee, 0xef), cont, cont}),
            b_.sequence({b_.literal("\xf0"), b_.byte_range(0x90, 0xbf), cont, cont}),
            b_.sequence({b_.byte_range(0xf1, 0xf3), cont, cont, cont}),
            b_.sequence({b_.literal("\xf4"), b_.byte_range(0x80, 0x8f), cont, cont}),
        });
    }

    GrammarBuilder& b_;
    const std::string re_;
    const std::string path_;
    size_t pos_ = 0;
};

}  // namespace

Rule json_pattern_string(GrammarBuilder& b, const std::string& pattern, const std::string& path) {
    return RegexCompiler(b, pattern, path).compile();
}

}  // namespace deskside::engine
