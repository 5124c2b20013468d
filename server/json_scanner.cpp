#include "server/json_scanner.h"

namespace deskside::server {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

bool is_hex(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

bool JsonScanner::in_string() const {
    return state_ == State::kString || state_ == State::kEscape || state_ == State::kHex;
}

JsonScanner::Step JsonScanner::open(char c) {
    stack_ += c;
    state_ = c == '{' ? State::kKeyOrClose : State::kValueOrClose;
    return Step::kByte;
}

JsonScanner::Step JsonScanner::close(char c) {
    if (stack_.empty() || stack_.back() != (c == '}' ? '{' : '[')) return Step::kError;
    stack_.pop_back();
    return after_value();
}

JsonScanner::Step JsonScanner::after_value() {
    if (stack_.empty()) {
        state_ = State::kDone;
        return Step::kDone;
    }
    state_ = State::kAfter;
    return Step::kByte;
}

JsonScanner::Step JsonScanner::push(char c) {
    switch (state_) {
        case State::kValue:
        case State::kValueOrClose:
            if (is_space(c)) return Step::kSpace;
            if (state_ == State::kValueOrClose && c == ']') return close(c);
            if (c == '{' || c == '[') return open(c);
            if (stack_.empty()) return Step::kError;  // see push's comment: containers only at the top
            if (c == '"') {
                key_ = false;
                state_ = State::kString;
            } else if (c == '-') {
                state_ = State::kMinus;
            } else if (c == '0') {
                state_ = State::kZero;
            } else if (is_digit(c)) {
                state_ = State::kInt;
            } else if (c == 't' || c == 'f' || c == 'n') {
                literal_rest_ = c == 't' ? "rue" : c == 'f' ? "alse" : "ull";
                state_ = State::kLiteral;
            } else {
                return Step::kError;
            }
            return Step::kByte;
        case State::kKeyOrClose:
        case State::kKey:
            if (is_space(c)) return Step::kSpace;
            if (state_ == State::kKeyOrClose && c == '}') return close(c);
            if (c != '"') return Step::kError;
            key_ = true;
            state_ = State::kString;
            return Step::kByte;
        case State::kColon:
            if (is_space(c)) return Step::kSpace;
            if (c != ':') return Step::kError;
            state_ = State::kValue;
            return Step::kByte;
        case State::kAfter:
            if (is_space(c)) return Step::kSpace;
            if (c == ',') {
                state_ = stack_.back() == '{' ? State::kKey : State::kValue;
                return Step::kByte;
            }
            if (c == '}' || c == ']') return close(c);
            return Step::kError;
        case State::kString:
            if (c == '"') {
                if (key_) {
                    state_ = State::kColon;
                    return Step::kByte;
                }
                return after_value();
            }
            if (c == '\\') state_ = State::kEscape;
            if (static_cast<unsigned char>(c) < 0x20) return Step::kError;  // control characters must be escaped
            return Step::kByte;
        case State::kEscape:
            if (c == 'u') {
                hex_left_ = 4;
                state_ = State::kHex;
            } else if (std::string_view("\"\\/bfnrt").find(c) != std::string_view::npos) {
                state_ = State::kString;
            } else {
                return Step::kError;
            }
            return Step::kByte;
        case State::kHex:
            if (!is_hex(c)) return Step::kError;
            if (--hex_left_ == 0) state_ = State::kString;
            return Step::kByte;
        case State::kLiteral:
            if (c != literal_rest_.front()) return Step::kError;
            literal_rest_.remove_prefix(1);
            return literal_rest_.empty() ? after_value() : Step::kByte;
        // Numbers: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?. One ends at the first byte
        // that cannot continue it, which is then read as what follows the value.
        case State::kMinus:
            if (!is_digit(c)) return Step::kError;
            state_ = c == '0' ? State::kZero : State::kInt;
            return Step::kByte;
        case State::kInt:
        case State::kZero:
            if (state_ == State::kInt && is_digit(c)) return Step::kByte;
            if (c == '.') {
                state_ = State::kDot;
                return Step::kByte;
            }
            [[fallthrough]];
        case State::kFrac:
            if (state_ == State::kFrac && is_digit(c)) return Step::kByte;
            if (c == 'e' || c == 'E') {
                state_ = State::kExpMark;
                return Step::kByte;
            }
            [[fallthrough]];
        case State::kExp:
            if (state_ == State::kExp && is_digit(c)) return Step::kByte;
            state_ = State::kAfter;  // the number is complete; `c` is what follows it
            return push(c);
        case State::kDot:
            if (!is_digit(c)) return Step::kError;
            state_ = State::kFrac;
            return Step::kByte;
        case State::kExpMark:
            if (c == '+' || c == '-') {
                state_ = State::kExpSign;
                return Step::kByte;
            }
            [[fallthrough]];
        case State::kExpSign:
            if (!is_digit(c)) return Step::kError;
            state_ = State::kExp;
            return Step::kByte;
        case State::kDone: return is_space(c) ? Step::kSpace : Step::kError;
    }
    return Step::kError;
}

std::string compact_json_object(std::string_view text) {
    JsonScanner scanner;
    std::string out;
    for (const char c : text) {
        const JsonScanner::Step step = scanner.push(c);
        if (step == JsonScanner::Step::kError) return {};
        if (step != JsonScanner::Step::kSpace) out += c;
    }
    return scanner.done() && out.starts_with('{') ? out : std::string();
}

}  // namespace deskside::server
