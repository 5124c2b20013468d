// ref: jinja2 3.1 lexer.py (Lexer.tokeniter) for the whitespace-control rules reproduced here.
#include "models/chat_template/lexer.h"

#include <algorithm>
#include <cctype>

#include "models/chat_template/chat_template.h"
#include "models/chat_template/unicode.h"

namespace deskside::models::jinja {

namespace {

class Lexer {
   public:
    explicit Lexer(std::string src) : src_(std::move(src)) {
        line_starts_.push_back(0);
        for (size_t i = 0; i < src_.size(); ++i)
            if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }

    std::vector<Token> run() {
        while (pos_ < src_.size()) {
            const size_t tag = find_tag_start(pos_);
            if (tag == std::string::npos) {
                emit(TokenType::kData, src_.substr(pos_), pos_);
                break;
            }
            std::string text = src_.substr(pos_, tag - pos_);
            const size_t text_pos = pos_;
            const char kind = src_[tag + 1];
            size_t p = tag + 2;
            char sign = 0;
            if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
            size_t raw_end = 0;
            const bool raw = kind == '%' && match_raw_begin(p, raw_end);
            if (sign == '-') {
                text = str_strip(text, nullptr, StripSide::kRight);
            } else if (sign != '+' && kind != '{') {
                lstrip(text);
            }
            if (!text.empty()) emit(TokenType::kData, text, text_pos);
            if (raw) {
                lex_raw(raw_end);
            } else if (kind == '#') {
                lex_comment(tag, p);
            } else {
                emit(kind == '{' ? TokenType::kVarBegin : TokenType::kBlockBegin, "", tag);
                pos_ = p;
                lex_tag(kind == '%');
            }
        }
        Token eof{TokenType::kEof, "", 0, 0};
        locate(src_.size(), eof);
        tokens_.push_back(eof);
        return std::move(tokens_);
    }

   private:
    std::string src_;
    std::vector<size_t> line_starts_;
    std::vector<Token> tokens_;
    size_t pos_ = 0;
    bool line_starting_ = true;  // the previous match ended with a newline (or nothing came yet)

    void locate(size_t offset, Token& t) const {
        const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
        const size_t line = static_cast<size_t>(it - line_starts_.begin());
        t.line = static_cast<int>(line);
        t.column = static_cast<int>(utf8_length(std::string_view(src_).substr(line_starts_[line - 1],
                                                                               offset - line_starts_[line - 1])) +
                                    1);
    }

    [[noreturn]] void error(size_t offset, const std::string& what) const {
        Token t;
        locate(offset, t);
        throw TemplateError(TemplateError::Kind::kSyntax,
                            "line " + std::to_string(t.line) + ", column " + std::to_string(t.column) + ": " + what,
                            "TemplateSyntaxError");
    }

    void emit(TokenType type, std::string value, size_t offset) {
        Token t{type, std::move(value), 0, 0};
        locate(offset, t);
        tokens_.push_back(std::move(t));
    }

    size_t find_tag_start(size_t from) const {
        for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
            if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
        }
        return std::string::npos;
    }

    size_t skip_space(size_t p) const {
        while (p < src_.size() && std::isspace(static_cast<unsigned char>(src_[p]))) ++p;
        return p;
    }

    bool starts(size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

    // lstrip_blocks: drop spaces and tabs between the line start and a block or comment tag.
    void lstrip(std::string& text) const {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos == 0 && !line_starting_) return;
        if (l_pos == text.size()) return;
        for (size_t i = l_pos; i < text.size(); ++i)
            if (!std::isspace(static_cast<unsigned char>(text[i]))) return;
        text.resize(l_pos);
    }

    // `{% raw %}` / `{%- raw -%}`: after `{%` and its sign at p. Sets `end` past the tag.
    bool match_raw_begin(size_t p, size_t& end) const {
        p = skip_space(p);
        if (!starts(p, "raw")) return false;
        p = skip_space(p + 3);
        if (starts(p, "-%}")) {
            end = skip_space(p + 3);
            return true;
        }
        if (starts(p, "%}")) {
            end = p + 2;
            return true;
        }
        return false;
    }

    void lex_raw(size_t body) {
        for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
            size_t p = i + 2;
            char sign = 0;
            if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
            p = skip_space(p);
            if (!starts(p, "endraw")) continue;
            p = skip_space(p + 6);
            size_t end;
            if (starts(p, "+%}")) {
                end = p + 3;
            } else if (starts(p, "-%}")) {
                end = skip_space(p + 3);
            } else if (starts(p, "%}")) {
                end = p + 2 + (starts(p + 2, "\n") ? 1 : 0);
            } else {
                continue;
            }
            line_starting_ = false;
            std::string text = src_.substr(body, i - body);
            if (sign == '-')
                text = str_strip(text, nullptr, StripSide::kRight);
            else if (sign != '+')
                lstrip(text);
            if (!text.empty()) emit(TokenType::kData, text, body);
            pos_ = end;
            line_starting_ = src_[end - 1] == '\n';
            return;
        }
        error(body, "Missing end of raw directive");
    }

    void lex_comment(size_t tag, size_t p) {
        const size_t close = src_.find("#}", p);
        if (close == std::string::npos) error(tag, "Missing end of comment tag");
        size_t end = close + 2;
        if (close > p && src_[close - 1] == '-')
            end = skip_space(end);
        else if (!(close > p && src_[close - 1] == '+') && starts(end, "\n"))
            ++end;
        pos_ = end;
        line_starting_ = src_[end - 1] == '\n';
    }

    // Inside {{ }} or {% %}: tokens until the matching end, brackets balanced.
    void lex_tag(bool block) {
        std::vector<char> balance;
        const size_t start = pos_;
        while (true) {
            if (pos_ >= src_.size()) error(start, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
            if (balance.empty()) {
                size_t end = 0;
                if (block) {
                    if (starts(pos_, "+%}")) end = pos_ + 3;
                    else if (starts(pos_, "-%}")) end = skip_space(pos_ + 3);
                    else if (starts(pos_, "%}")) end = pos_ + 2 + (starts(pos_ + 2, "\n") ? 1 : 0);
                } else {
                    if (starts(pos_, "-}}")) end = skip_space(pos_ + 3);
                    else if (starts(pos_, "}}")) end = pos_ + 2;
                }
                if (end) {
                    emit(block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", pos_);
                    pos_ = end;
                    line_starting_ = src_[end - 1] == '\n';
                    return;
                }
            }
            const unsigned char c = static_cast<unsigned char>(src_[pos_]);
            if (std::isspace(c)) {
                ++pos_;
            } else if (std::isdigit(c)) {
                lex_number();
            } else if (std::isalpha(c) || c == '_') {
                size_t e = pos_;
                while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
                emit(TokenType::kName, src_.substr(pos_, e - pos_), pos_);
                pos_ = e;
            } else if (c == '\'' || c == '"') {
                lex_string();
            } else {
                lex_operator(balance);
            }
        }
    }

    size_t digits(size_t p) const {  // (\d+_)*\d+
        size_t e = p;
        while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) ||
                                   (src_[e] == '_' && e + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e + 1])))))
            ++e;
        return e;
    }

    void lex_number() {
        const size_t start = pos_;
        auto strip = [](std::string s) {
            s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
            return s;
        };
        if (src_[pos_] == '0' && pos_ + 1 < src_.size() && std::strchr("xXoObB", src_[pos_ + 1])) {
            const char base_c = static_cast<char>(std::tolower(src_[pos_ + 1]));
            const int base = base_c == 'x' ? 16 : base_c == 'o' ? 8 : 2;
            size_t e = pos_ + 2;
            while (e < src_.size() && (std::isxdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
            const std::string body = strip(src_.substr(pos_ + 2, e - pos_ - 2));
            emit(TokenType::kInt, std::to_string(std::stoll(body, nullptr, base)), start);
            pos_ = e;
            return;
        }
        size_t e = digits(pos_);
        bool is_float = false;
        const bool after_dot = start > 0 && src_[start - 1] == '.';  // jinja2's (?<!\.) lookbehind
        if (!after_dot) {
            size_t f = e;
            if (f + 1 < src_.size() && src_[f] == '.' && std::isdigit(static_cast<unsigned char>(src_[f + 1]))) {
                f = digits(f + 1);
                is_float = true;
            }
            if (f < src_.size() && (src_[f] == 'e' || src_[f] == 'E')) {
                size_t g = f + 1;
                if (g < src_.size() && (src_[g] == '+' || src_[g] == '-')) ++g;
                if (g < src_.size() && std::isdigit(static_cast<unsigned char>(src_[g]))) {
                    f = digits(g);
                    is_float = true;
                }
            }
            if (is_float) e = f;
        }
        emit(is_float ? TokenType::kFloat : TokenType::kInt, strip(src_.substr(start, e - start)), start);
        pos_ = e;
    }

    void lex_string() {
        const char quote = src_[pos_];
        const size_t start = pos_;
        std::string out;
        size_t p = pos_ + 1;
        while (true) {
            if (p >= src_.size()) error(start, "unexpected char '" + std::string(1, quote) + "'");
            const char c = src_[p];
            if (c == quote) break;
            if (c != '\\' || p + 1 >= src_.size()) {
                out.push_back(c);
                ++p;
                continue;
            }
            // Python's unicode-escape decoding of the literal's body.
            const char n = src_[p + 1];
            p += 2;
            switch (n) {
                case '\n': break;
                case '\\': out.push_back('\\'); break;
                case '\'': out.push_back('\''); break;
                case '"': out.push_back('"'); break;
                case 'a': out.push_back('\a'); break;
                case 'b': out.push_back('\b'); break;
                case 'f': out.push_back('\f'); break;
                case 'n': out.push_back('\n'); break;
                case 'r': out.push_back('\r'); break;
                case 't': out.push_back('\t'); break;
                case 'v': out.push_back('\v'); break;
                case 'x':
                case 'u':
                case 'U': {
                    const size_t len = n == 'x' ? 2 : n == 'u' ? 4 : 8;
                    if (p + len > src_.size() ||
                        !std::all_of(src_.begin() + p, src_.begin() + p + len, [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); }))
                        error(p - 2, "invalid \\" + std::string(1, n) + " escape in string");
                    utf8_append(out, static_cast<char32_t>(std::stoul(src_.substr(p, len), nullptr, 16)));
                    p += len;
                    break;
                }
                default:
                    if (n >= '0' && n <= '7') {
                        unsigned v = n - '0';
                        for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k) v = v * 8 + (src_[p++] - '0');
                        utf8_append(out, v);
                    } else {
                        out.push_back('\\');
                        out.push_back(n);
                    }
            }
        }
        emit(TokenType::kString, std::move(out), start);
        pos_ = p + 1;
    }

    void lex_operator(std::vector<char>& balance) {
        static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
        for (const char* op : kTwo) {
            if (starts(pos_, op)) {
                emit(TokenType::kOp, op, pos_);
                pos_ += 2;
                return;
            }
        }
        const char c = src_[pos_];
        if (!std::strchr("+-/*%~[](){}><=.:|,;", c)) error(pos_, std::string("unexpected char '") + c + "'");
        if (c == '(' || c == '[' || c == '{') {
            balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        } else if (c == ')' || c == ']' || c == '}') {
            if (balance.empty()) error(pos_, std::string("unexpected '") + c + "'");
            if (balance.back() != c)
                error(pos_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
            balance.pop_back();
        }
        emit(TokenType::kOp, std::string(1, c), pos_);
        ++pos_;
    }
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
    // jinja2 turns \r\n and \r into \n and drops one trailing newline (keep_trailing_newline=False).
    std::string src;
    src.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            src.push_back('\n');
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            src.push_back(source[i]);
        }
    }
    if (!src.empty() && src.back() == '\n') src.pop_back();
    return Lexer(std::move(src)).run();
}

}  // namespace deskside::models::jinja
