// An incremental JSON syntax checker, one byte at a time: it knows, after every byte, whether the
// text so far can still be the start of a JSON value (RFC 8259). The tool-call stream uses it to
// send a call's arguments while the model is still writing them: every byte it lets through keeps
// the arguments a prefix of valid JSON, and the byte that would break them is caught where it is.
// ref: RFC 8259 (The JavaScript Object Notation (JSON) Data Interchange Format), sections 2-7
#pragma once

#include <string>
#include <string_view>

namespace deskside::server {

class JsonScanner {
   public:
    enum class Step {
        kSpace,  // whitespace between tokens (not part of the value)
        kByte,   // part of the value
        kDone,   // the byte that completes the top-level value
        kError,  // the byte cannot continue a JSON value (the scanner stays as it was)
    };
    // A top-level value must be an object or an array: a number there could only end at the text's
    // end, which a byte-at-a-time scanner never sees.
    Step push(char c);
    int depth() const { return static_cast<int>(stack_.size()); }  // containers open
    bool in_string() const;
    bool done() const { return state_ == State::kDone; }

   private:
    enum class State {
        kValue, kValueOrClose, kKeyOrClose, kKey, kColon, kAfter,
        kString, kEscape, kHex,
        kMinus, kZero, kInt, kDot, kFrac, kExpMark, kExpSign, kExp,
        kLiteral, kDone,
    };
    Step open(char c);
    Step close(char c);
    Step after_value();
    State state_ = State::kValue;
    std::string stack_;  // '{' and '[' of the open containers
    bool key_ = false;   // the string being read is an object key
    int hex_left_ = 0;
    std::string_view literal_rest_;
};

// `text` with the whitespace between its tokens removed, when it is one JSON object (and nothing
// else but whitespace); empty when it is not.
std::string compact_json_object(std::string_view text);

}  // namespace deskside::server
