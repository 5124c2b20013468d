// Pre-tokenization by regular expressions, as Hugging Face's Split pre-tokenizer with the
// "Isolated" behaviour does it: each expression cuts every current piece into its matches and
// the text between them, and the next expression cuts those pieces further.
//
// The expressions are PCRE2 patterns compiled in UTF + UCP mode (\p{L}, \s, \d follow Unicode)
// and JIT-compiled when the platform allows it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deskside::models::tokenizer {

class RegexSplitter {
   public:
    // Throws std::runtime_error naming the pattern and the offset of a syntax error.
    explicit RegexSplitter(const std::vector<std::string>& patterns);
    ~RegexSplitter();
    RegexSplitter(const RegexSplitter&) = delete;
    RegexSplitter& operator=(const RegexSplitter&) = delete;

    // Pieces of `text` (views into it), in order, covering it completely. `text` must be valid
    // UTF-8 (see sanitize_utf8). Safe to call from several threads at once.
    std::vector<std::string_view> split(std::string_view text) const;

   private:
    struct Compiled;
    std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace deskside::models::tokenizer
