// JSON Schema (2020-12, with the OpenAPI `nullable` and draft-7 tuple `items`) -> grammar rules.
//
// Output form. Whitespace is bounded so a model cannot loop on it: after `{`, `[`, `,` and `:`
// and before `}` and `]` at most one run of either a single space or a newline followed by up to
// 16 spaces (kMaxIndent); nowhere else (not before `,` or `:`). Object properties are written in
// the schema's own order (as OpenAI's structured outputs do: the schema is an ordered_json as the
// client sent it); required ones always, optional ones may be skipped.
//
// Keywords enforced: type (also arrays of types), properties, required, additionalProperties
// (false, true or a schema; absent is taken as false, which only narrows the output), enum,
// const, items, prefixItems (and draft-7 items: [...] with additionalItems), minItems, maxItems,
// uniqueItems: false, anyOf, oneOf (see compile_one_of), allOf (merged), $ref into the document
// ("#", "#/$defs/x", "#/definitions/x", recursion included), minLength, maxLength, pattern (the
// regular-expression subset in grammar_regex.cpp), format (date, time, date-time, uuid, email,
// ipv4), minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers, nullable.
// Annotations (title, description, default, examples, $schema, $id, $comment, deprecated,
// readOnly, writeOnly) are ignored. Any other keyword, and any combination that cannot be enforced
// (bounds on a non-integer number, pattern with a length, ...), throws SchemaError naming the
// keyword and its path: the output is never silently left unconstrained.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/grammar.h"

namespace deskside::engine {

constexpr int kMaxIndent = 16;

GrammarBuilder::Rule compile_json_schema(GrammarBuilder& builder, const nlohmann::ordered_json& schema);

// The characters of a JSON string, each one unit of minLength / maxLength: a plain ASCII
// character, a short escape, a \uXXXX escape outside the surrogates (a surrogate pair would be one
// character to a validator but two units here) or a well-formed UTF-8 sequence (RFC 3629).
GrammarBuilder::Rule json_string_char(GrammarBuilder& builder);
// A well-formed UTF-8 sequence of two to four bytes.
GrammarBuilder::Rule utf8_multibyte(GrammarBuilder& builder);
// Optional whitespace as described above.
GrammarBuilder::Rule json_whitespace(GrammarBuilder& builder);

// A JSON string whose decoded value matches an ECMA-262 regular expression (search semantics, as
// JSON Schema's `pattern`), from the subset grammar_regex.cpp supports; SchemaError otherwise.
GrammarBuilder::Rule json_pattern_string(GrammarBuilder& builder, const std::string& pattern, const std::string& path);

// A JSON string in one of the formats listed above; SchemaError (keyword "format") otherwise.
GrammarBuilder::Rule json_format_string(GrammarBuilder& builder, const std::string& format, const std::string& path);

// The decimal integers in [lo, hi] (either side open when absent), canonical: no leading zeros, no -0.
GrammarBuilder::Rule json_integer_range(GrammarBuilder& builder, std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace deskside::engine
