// Template source -> TemplateBody, following jinja2's grammar (parser.py) and its compile-time
// checks (unknown filters and tests outside an if/conditional fail at parse time).
#pragma once

#include <memory>
#include <string>

#include "models/chat_template/ast.h"

namespace deskside::models::jinja {

// Throws TemplateError(kSyntax) with "line L, column C: ..." for malformed templates.
std::shared_ptr<const TemplateBody> parse_template(const std::string& source);

// Names of the filters and tests the interpreter provides (builtins.cpp).
bool has_filter(const std::string& name);
bool has_test(const std::string& name);

}  // namespace deskside::models::jinja
