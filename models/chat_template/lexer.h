// Splits template source into tokens the way jinja2's lexer does with trim_blocks=True and
// lstrip_blocks=True: text between tags becomes kData with the whitespace control
// ({%- -%} {{- -}} {%+ +%}) already applied, comments disappear, {% raw %} bodies become
// kData, and the inside of {{ }} / {% %} becomes names, literals and operators.
#pragma once

#include <string>
#include <vector>

namespace deskside::models::jinja {

enum class TokenType { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
    TokenType type;
    std::string value;  // kString: already unescaped
    int line = 1;
    int column = 1;
};

// Throws TemplateError(kSyntax) for unterminated tags, comments and strings.
std::vector<Token> tokenize(const std::string& source);

}  // namespace deskside::models::jinja
