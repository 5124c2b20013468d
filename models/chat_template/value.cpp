#include "models/chat_template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "models/chat_template/unicode.h"

namespace deskside::models::jinja {

void fail(std::string type, std::string message) {
    throw TemplateError(TemplateError::Kind::kRuntime, type + ": " + message, type);
}

const Value* Dict::find(const Value& key) const {
    for (const auto& [k, v] : items)
        if (equals(k, key)) return &v;
    return nullptr;
}

void Dict::set(const Value& key, Value value) {
    for (auto& [k, v] : items) {
        if (equals(k, key)) {
            v = std::move(value);
            return;
        }
    }
    items.emplace_back(key, std::move(value));
}

namespace {

template <class Json>
Value convert_json(const Json& j) {
    switch (j.type()) {
        case nlohmann::json::value_t::null: return Value::none();
        case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
        case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
        case nlohmann::json::value_t::number_unsigned:
            return Value::integer(static_cast<int64_t>(j.template get<uint64_t>()));
        case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
        case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
        case nlohmann::json::value_t::array: {
            List items;
            for (const auto& e : j) items.push_back(convert_json(e));
            return Value::list(std::move(items));
        }
        case nlohmann::json::value_t::object: {
            Dict d;
            for (auto it = j.begin(); it != j.end(); ++it)
                d.items.emplace_back(Value::string(it.key()), convert_json(it.value()));
            return Value::dict(std::move(d));
        }
        default: fail("TypeError", "unsupported JSON value (binary or discarded)");
    }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return convert_json(j); }
Value Value::from_json(const nlohmann::json& j) { return convert_json(j); }

List Value::iterate() const {
    switch (kind_) {
        case Kind::kUndefined: return {};  // jinja2's Undefined iterates as empty
        case Kind::kList:
        case Kind::kTuple: return *list_;
        case Kind::kGenerator: {
            // A generator is consumed by the first iteration, as in Python.
            List out = std::move(*list_);
            list_->clear();
            return out;
        }
        case Kind::kDict: {
            List keys;
            for (const auto& kv : dict_->items) keys.push_back(kv.first);
            return keys;
        }
        case Kind::kString: {
            List chars;
            for (char32_t cp : utf8_decode(str_)) chars.push_back(Value::string(utf8_encode(std::u32string(1, cp))));
            return chars;
        }
        default: fail("TypeError", "'" + type_name() + "' object is not iterable");
    }
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::kUndefined:
        case Kind::kNone: return false;
        case Kind::kBool:
        case Kind::kInt: return int_ != 0;
        case Kind::kFloat: return float_ != 0.0;
        case Kind::kString: return !str_.empty();
        case Kind::kList:
        case Kind::kTuple: return !list_->empty();
        case Kind::kDict: return !dict_->items.empty();
        default: return true;  // generators, namespaces and functions are always true in Python
    }
}

std::string Value::type_name() const {
    switch (kind_) {
        case Kind::kUndefined: return "Undefined";
        case Kind::kNone: return "NoneType";
        case Kind::kBool: return "bool";
        case Kind::kInt: return "int";
        case Kind::kFloat: return "float";
        case Kind::kString: return markup_ ? "Markup" : "str";
        case Kind::kList: return "list";
        case Kind::kTuple: return "tuple";
        case Kind::kDict: return "dict";
        case Kind::kGenerator: return "generator";
        case Kind::kNamespace: return "Namespace";
        case Kind::kCallable: return "function";
    }
    return "object";
}

std::string float_repr(double f) {
    if (std::isnan(f)) return "nan";
    if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
    if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
    // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |f| < 1e16.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    const size_t epos = sci.find('e');
    const int exp10 = std::stoi(sci.substr(epos + 1));
    std::string mant = sci.substr(0, epos);
    const bool neg = mant[0] == '-';
    if (neg) mant.erase(0, 1);
    std::string digits;
    for (char c : mant)
        if (c != '.') digits.push_back(c);
    std::string out = neg ? "-" : "";
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            out += "0." + std::string(-exp10 - 1, '0') + digits;
        } else if (static_cast<int>(digits.size()) <= exp10 + 1) {
            out += digits + std::string(exp10 + 1 - digits.size(), '0') + ".0";
        } else {
            out += digits.substr(0, exp10 + 1) + "." + digits.substr(exp10 + 1);
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + e;
}

namespace {

std::string string_repr(const std::string& s) {
    const bool has_single = s.find('\'') != std::string::npos;
    const bool has_double = s.find('"') != std::string::npos;
    const char quote = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, quote);
    for (char32_t cp : utf8_decode(s)) {
        char buf[16];
        if (cp == static_cast<char32_t>(quote) || cp == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(cp));
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (!is_printable(cp)) {
            if (cp < 0x100)
                std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
            else if (cp < 0x10000)
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
            else
                std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
            out += buf;
        } else {
            utf8_append(out, cp);
        }
    }
    out.push_back(quote);
    return out;
}

std::string seq_repr(const List& items, const char* open, const char* close, bool tuple) {
    std::string out = open;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += to_repr(items[i]);
    }
    if (tuple && items.size() == 1) out += ",";
    return out + close;
}

std::string dict_repr(const Dict& d) {
    std::string out = "{";
    for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        out += to_repr(d.items[i].first) + ": " + to_repr(d.items[i].second);
    }
    return out + "}";
}

}  // namespace

std::string to_str(const Value& v) {
    switch (v.kind()) {
        case Kind::kUndefined: return "";
        case Kind::kString: return v.str();
        default: return to_repr(v);
    }
}

std::string to_repr(const Value& v) {
    switch (v.kind()) {
        case Kind::kUndefined: return "Undefined";
        case Kind::kNone: return "None";
        case Kind::kBool: return v.as_bool() ? "True" : "False";
        case Kind::kInt: return std::to_string(v.as_int());
        case Kind::kFloat: return float_repr(v.as_float());
        case Kind::kString: return v.is_markup() ? "Markup(" + string_repr(v.str()) + ")" : string_repr(v.str());
        case Kind::kList: return seq_repr(v.items(), "[", "]", false);
        case Kind::kTuple: return seq_repr(v.items(), "(", ")", true);
        case Kind::kDict: return dict_repr(v.dict_ref());
        case Kind::kGenerator: return "<generator object>";
        case Kind::kNamespace: return "<Namespace " + dict_repr(v.dict_ref()) + ">";
        case Kind::kCallable: return "<function " + v.fn().name + ">";
    }
    return "";
}

bool equals(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    const bool a_seq = a.kind() == Kind::kList || a.kind() == Kind::kTuple;
    const bool b_seq = b.kind() == Kind::kList || b.kind() == Kind::kTuple;
    if (a_seq || b_seq) {
        if (a.kind() != b.kind()) return false;  // [1] != (1,) in Python
        const List &x = a.items(), &y = b.items();
        if (x.size() != y.size()) return false;
        for (size_t i = 0; i < x.size(); ++i)
            if (!equals(x[i], y[i])) return false;
        return true;
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Kind::kUndefined:
        case Kind::kNone: return true;
        case Kind::kString: return a.str() == b.str();
        case Kind::kDict: {
            const Dict &x = a.dict_ref(), &y = b.dict_ref();
            if (x.items.size() != y.items.size()) return false;
            for (const auto& [k, v] : x.items) {
                const Value* other = y.find(k);
                if (!other || !equals(v, *other)) return false;
            }
            return true;
        }
        case Kind::kNamespace:
        case Kind::kGenerator: return &a.dict_ref() == &b.dict_ref();
        case Kind::kCallable: return &a.fn() == &b.fn();
        default: return false;
    }
}

bool less(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.as_float() < b.as_float();
        return a.as_int() < b.as_int();
    }
    if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order = code point order
    if ((a.kind() == Kind::kList && b.kind() == Kind::kList) || (a.kind() == Kind::kTuple && b.kind() == Kind::kTuple)) {
        const List &x = a.items(), &y = b.items();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (equals(x[i], y[i])) continue;
            return less(x[i], y[i]);
        }
        return x.size() < y.size();
    }
    fail("TypeError", "'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '\'': out += "&#39;"; break;
            case '"': out += "&#34;"; break;
            default: out.push_back(c);
        }
    }
    return out;
}

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
    out.push_back('"');
    char buf[16];
    for (char32_t cp : utf8_decode(s)) {
        switch (cp) {
            case '"': out += "\\\""; continue;
            case '\\': out += "\\\\"; continue;
            case '\n': out += "\\n"; continue;
            case '\r': out += "\\r"; continue;
            case '\t': out += "\\t"; continue;
            case '\b': out += "\\b"; continue;
            case '\f': out += "\\f"; continue;
            default: break;
        }
        if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
            if (cp >= 0x10000) {  // surrogate pair, as json.dumps writes it
                const char32_t v = cp - 0x10000;
                std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                              static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
            } else {
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
            }
            out += buf;
        } else {
            utf8_append(out, cp);
        }
    }
    out.push_back('"');
}

std::string json_float(double f) {
    if (std::isnan(f)) return "NaN";
    if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
    return float_repr(f);
}

std::string json_key(const Value& k) {
    switch (k.kind()) {
        case Kind::kString: return k.str();
        case Kind::kBool: return k.as_bool() ? "true" : "false";
        case Kind::kNone: return "null";
        case Kind::kInt: return std::to_string(k.as_int());
        case Kind::kFloat: return json_float(k.as_float());
        default: fail("TypeError", "keys must be str, int, float, bool or None, not " + k.type_name());
    }
}

void json_value(std::string& out, const Value& v, const JsonOptions& opt, int level) {
    const std::string item_sep = opt.has_separators ? opt.item_separator : (opt.has_indent ? "," : ", ");
    const std::string key_sep = opt.has_separators ? opt.key_separator : ": ";
    auto newline = [&](int lvl) {
        out.push_back('\n');
        for (int i = 0; i < lvl; ++i) out += opt.indent;
    };
    switch (v.kind()) {
        case Kind::kNone: out += "null"; return;
        case Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
        case Kind::kInt: out += std::to_string(v.as_int()); return;
        case Kind::kFloat: out += json_float(v.as_float()); return;
        case Kind::kString: json_string(out, v.str(), opt.ensure_ascii); return;
        case Kind::kList:
        case Kind::kTuple: {
            const List& items = v.items();
            if (items.empty()) {
                out += "[]";
                return;
            }
            out.push_back('[');
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += item_sep;
                if (opt.has_indent) newline(level + 1);
                json_value(out, items[i], opt, level + 1);
            }
            if (opt.has_indent) newline(level);
            out.push_back(']');
            return;
        }
        case Kind::kDict: {
            std::vector<std::pair<std::string, const Value*>> entries;
            for (const auto& [k, val] : v.dict_ref().items) entries.emplace_back(json_key(k), &val);
            if (entries.empty()) {
                out += "{}";
                return;
            }
            if (opt.sort_keys)
                std::stable_sort(entries.begin(), entries.end(),
                                 [](const auto& a, const auto& b) { return a.first < b.first; });
            out.push_back('{');
            for (size_t i = 0; i < entries.size(); ++i) {
                if (i) out += item_sep;
                if (opt.has_indent) newline(level + 1);
                json_string(out, entries[i].first, opt.ensure_ascii);
                out += key_sep;
                json_value(out, *entries[i].second, opt, level + 1);
            }
            if (opt.has_indent) newline(level);
            out.push_back('}');
            return;
        }
        default: fail("TypeError", "Object of type " + v.type_name() + " is not JSON serializable");
    }
}

}  // namespace

std::string json_dumps(const Value& v, const JsonOptions& opt) {
    std::string out;
    json_value(out, v, opt, 0);
    return out;
}

}  // namespace deskside::models::jinja
