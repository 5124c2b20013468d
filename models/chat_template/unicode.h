// The bits of Python's str behaviour that depend on code points rather than bytes: len(),
// indexing and slicing count code points; strip()/split() use str.isspace(); upper()/lower()
// map letters beyond ASCII; repr() escapes unprintable characters.
#pragma once

#include <string>
#include <string_view>

namespace deskside::models::jinja {

std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(std::string_view s);

// str.isspace() for one code point.
bool is_space(char32_t cp);
// str.isprintable() for one code point (approximate outside the common ranges).
bool is_printable(char32_t cp);
bool is_alpha(char32_t cp);
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);

std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);

// str.strip(chars) family; `chars` absent (nullptr) means whitespace.
enum class StripSide { kLeft, kRight, kBoth };
std::string str_strip(std::string_view s, const std::string* chars, StripSide side);

}  // namespace deskside::models::jinja
