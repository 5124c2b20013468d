// Python methods templates call on values ("x".startswith(...), d.get(...), ...), the `%` and
// str.format formatting they use, and the globals of transformers' chat-template environment.
// Methods that would mutate a list or dict resolve to an Undefined that fails with the
// SecurityError of jinja2's ImmutableSandboxedEnvironment.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "models/chat_template/interpreter.h"
#include "models/chat_template/unicode.h"

namespace deskside::models::jinja {

namespace {

const Value* arg(const CallArgs& a, size_t pos, const char* name) {
    for (const auto& [k, v] : a.kwargs)
        if (k == name) return &v;
    return pos < a.args.size() ? &a.args[pos] : nullptr;
}

const Value& need(const CallArgs& a, size_t pos, const char* name, const std::string& method) {
    const Value* v = arg(a, pos, name);
    if (!v) fail("TypeError", method + "() missing required argument '" + name + "'");
    return *v;
}

using Method = std::function<Value(Interpreter&, CallArgs&)>;

Value method_value(const std::string& name, Method fn) { return Value::callable(name, std::move(fn)); }

// str.split / rsplit with Python's whitespace and separator rules.
List split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
    List out;
    if (!sep || sep->is_none()) {
        std::u32string u = utf8_decode(s);
        if (from_right) std::reverse(u.begin(), u.end());
        std::vector<std::u32string> parts;
        size_t i = 0;
        while (i < u.size()) {
            while (i < u.size() && is_space(u[i])) ++i;
            if (i >= u.size()) break;
            if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
                size_t e = u.size();
                while (e > i && is_space(u[e - 1])) --e;
                parts.push_back(u.substr(i, e - i));
                break;
            }
            size_t j = i;
            while (j < u.size() && !is_space(u[j])) ++j;
            parts.push_back(u.substr(i, j - i));
            i = j;
        }
        if (from_right) {
            std::reverse(parts.begin(), parts.end());
            for (auto& p : parts) std::reverse(p.begin(), p.end());
        }
        for (auto& p : parts) out.push_back(Value::string(utf8_encode(p)));
        return out;
    }
    const std::string d = to_str(*sep);
    if (d.empty()) fail("ValueError", "empty separator");
    std::vector<std::string> parts;
    if (!from_right) {
        size_t pos = 0;
        while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
            const size_t hit = s.find(d, pos);
            if (hit == std::string::npos) break;
            parts.push_back(s.substr(pos, hit - pos));
            pos = hit + d.size();
        }
        parts.push_back(s.substr(pos));
    } else {
        size_t end = s.size();
        std::vector<std::string> rev;
        while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
            if (end < d.size()) break;
            const size_t hit = s.rfind(d, end - d.size());
            if (hit == std::string::npos) break;
            rev.push_back(s.substr(hit + d.size(), end - hit - d.size()));
            end = hit;
        }
        rev.push_back(s.substr(0, end));
        parts.assign(rev.rbegin(), rev.rend());
    }
    for (auto& p : parts) out.push_back(Value::string(std::move(p)));
    return out;
}

// startswith/endswith accept a string or a tuple of strings.
bool affix_match(const std::string& s, const Value& affix, bool prefix) {
    if (affix.kind() == Kind::kTuple || affix.kind() == Kind::kList) {
        for (const Value& a : affix.items())
            if (affix_match(s, a, prefix)) return true;
        return false;
    }
    if (!affix.is_string())
        fail("TypeError", std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " + affix.type_name());
    const std::string& a = affix.str();
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

std::string py_title(const std::string& s) {
    std::u32string u = utf8_decode(s);
    bool prev_cased = false;
    for (char32_t& c : u) {
        const bool cased = is_upper(c) || is_lower(c);
        c = cased ? (prev_cased ? to_lower(c) : to_upper(c)) : c;
        prev_cased = cased;
    }
    return utf8_encode(u);
}

// Format spec mini-language subset: [[fill]align][sign][0][width][.precision][type].
std::string apply_spec(const Value& v, const std::string& spec) {
    if (spec.empty()) return to_str(v);
    size_t i = 0;
    char fill = ' ', align = 0;
    if (spec.size() >= 2 && std::strchr("<>^=", spec[1])) {
        fill = spec[0];
        align = spec[1];
        i = 2;
    } else if (std::strchr("<>^=", spec[0])) {
        align = spec[0];
        i = 1;
    }
    std::string sign;
    if (i < spec.size() && std::strchr("+- ", spec[i])) sign = std::string(1, spec[i++]);
    if (i < spec.size() && spec[i] == '0') {
        fill = '0';
        if (!align) align = '=';
        ++i;
    }
    size_t width = 0;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) width = width * 10 + (spec[i++] - '0');
    int precision = -1;
    if (i < spec.size() && spec[i] == '.') {
        precision = 0;
        ++i;
        while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) precision = precision * 10 + (spec[i++] - '0');
    }
    const char type = i < spec.size() ? spec[i] : 0;
    std::string body;
    if (type == 'f' || type == 'F' || type == 'e' || type == '%' || (precision >= 0 && v.is_number() && !type)) {
        char buf[64];
        const double x = v.as_float() * (type == '%' ? 100.0 : 1.0);
        const char conv = type == 'e' ? 'e' : 'f';
        std::snprintf(buf, sizeof buf, conv == 'e' ? "%.*e" : "%.*f", precision < 0 ? 6 : precision, x);
        body = buf;
        if (type == '%') body += "%";
    } else if (type == 'd') {
        body = std::to_string(v.as_int());
    } else {
        body = to_str(v);
        if (precision >= 0) body = utf8_encode(utf8_decode(body).substr(0, static_cast<size_t>(precision)));
    }
    if (v.is_number() && sign == "+" && body[0] != '-') body = "+" + body;
    const size_t len = utf8_length(body);
    if (len >= width) return body;
    const size_t pad = width - len;
    if (!align) align = v.is_number() ? '>' : '<';
    if (align == '<') return body + std::string(pad, fill);
    if (align == '>') return std::string(pad, fill) + body;
    if (align == '^') return std::string(pad / 2, fill) + body + std::string(pad - pad / 2, fill);
    const bool has_sign = !body.empty() && (body[0] == '-' || body[0] == '+');
    return (has_sign ? body.substr(0, 1) : "") + std::string(pad, fill) + body.substr(has_sign ? 1 : 0);
}

// str.format: {} {0} {name} {name.attr} {name[key]} with !r/!s and a format spec.
std::string str_format(Interpreter& in, const std::string& fmt, const CallArgs& a) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        const char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
            else fail("ValueError", "Single '}' encountered in format string");
            out.push_back('}');
            continue;
        }
        if (c != '{') {
            out.push_back(c);
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out.push_back('{');
            ++i;
            continue;
        }
        const size_t close = fmt.find('}', i);
        if (close == std::string::npos) fail("ValueError", "expected '}' before end of string");
        std::string field = fmt.substr(i + 1, close - i - 1);
        i = close;
        std::string spec, conv;
        if (const size_t colon = field.find(':'); colon != std::string::npos) {
            spec = field.substr(colon + 1);
            field.resize(colon);
        }
        if (const size_t bang = field.find('!'); bang != std::string::npos) {
            conv = field.substr(bang + 1);
            field.resize(bang);
        }
        size_t name_end = field.find_first_of(".[");
        const std::string head = field.substr(0, name_end);
        Value v;
        if (head.empty()) {
            if (auto_index >= a.args.size()) fail("IndexError", "Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
            v = a.args[auto_index++];
        } else if (std::all_of(head.begin(), head.end(), ::isdigit)) {
            const size_t idx = std::stoul(head);
            if (idx >= a.args.size()) fail("IndexError", "Replacement index " + head + " out of range for positional args tuple");
            v = a.args[idx];
        } else {
            const Value* kw = nullptr;
            for (const auto& [k, val] : a.kwargs)
                if (k == head) kw = &val;
            if (!kw) fail("KeyError", "'" + head + "'");
            v = *kw;
        }
        while (name_end != std::string::npos && name_end < field.size()) {
            if (field[name_end] == '.') {
                const size_t next = field.find_first_of(".[", name_end + 1);
                v = in.getattr(v, field.substr(name_end + 1, next == std::string::npos ? std::string::npos : next - name_end - 1));
                name_end = next;
            } else {
                const size_t rb = field.find(']', name_end);
                const std::string key = field.substr(name_end + 1, rb - name_end - 1);
                const bool numeric = !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit);
                v = in.getitem(v, numeric ? Value::integer(std::stoll(key)) : Value::string(key));
                name_end = rb == std::string::npos ? rb : rb + 1;
            }
        }
        if (conv == "r") v = Value::string(to_repr(v));
        out += apply_spec(v, spec);
    }
    return out;
}

Value string_method(const Value& obj, const std::string& name) {
    const std::string s = obj.str();
    const bool markup = obj.is_markup();
    auto strip_fn = [s, markup, name](StripSide side) {
        return method_value(name, [s, markup, side, name](Interpreter&, CallArgs& a) {
            const Value* chars = arg(a, 0, "chars");
            std::string set = chars && !chars->is_none() ? to_str(*chars) : std::string();
            return Value::string(str_strip(s, chars && !chars->is_none() ? &set : nullptr, side), markup);
        });
    };
    if (name == "strip") return strip_fn(StripSide::kBoth);
    if (name == "lstrip") return strip_fn(StripSide::kLeft);
    if (name == "rstrip") return strip_fn(StripSide::kRight);
    if (name == "split" || name == "rsplit") {
        return method_value(name, [s, name](Interpreter&, CallArgs& a) {
            const Value* max = arg(a, 1, "maxsplit");
            return Value::list(split(s, arg(a, 0, "sep"), max ? max->as_int() : -1, name == "rsplit"));
        });
    }
    if (name == "startswith" || name == "endswith") {
        return method_value(name, [s, name](Interpreter&, CallArgs& a) {
            return Value::boolean(affix_match(s, need(a, 0, "prefix", name), name == "startswith"));
        });
    }
    if (name == "upper") return method_value(name, [s, markup](Interpreter&, CallArgs&) { return Value::string(str_upper(s), markup); });
    if (name == "lower" || name == "casefold")
        return method_value(name, [s, markup](Interpreter&, CallArgs&) { return Value::string(str_lower(s), markup); });
    if (name == "title") return method_value(name, [s, markup](Interpreter&, CallArgs&) { return Value::string(py_title(s), markup); });
    if (name == "capitalize") {
        return method_value(name, [s, markup](Interpreter&, CallArgs&) {
            std::u32string u = utf8_decode(s);
            for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_upper(u[i]) : to_lower(u[i]);
            return Value::string(utf8_encode(u), markup);
        });
    }
    if (name == "replace") {
        return method_value(name, [s, markup](Interpreter&, CallArgs& a) {
            const std::string old = to_str(need(a, 0, "old", "replace")), repl = to_str(need(a, 1, "new", "replace"));
            const Value* count = arg(a, 2, "count");
            int64_t left = count ? count->as_int() : -1;
            std::string out;
            size_t pos = 0;
            while (!old.empty() && left != 0) {
                const size_t hit = s.find(old, pos);
                if (hit == std::string::npos) break;
                out.append(s, pos, hit - pos);
                out += repl;
                pos = hit + old.size();
                if (left > 0) --left;
            }
            out.append(s, pos, std::string::npos);
            return Value::string(old.empty() ? s : out, markup);
        });
    }
    if (name == "format") {
        return method_value(name, [s, markup](Interpreter& in, CallArgs& a) {
            if (markup) {  // Markup.format escapes its arguments
                for (Value& v : a.args)
                    if (!v.is_markup()) v = Value::string(html_escape(to_str(v)), true);
            }
            return Value::string(str_format(in, s, a), markup);
        });
    }
    if (name == "join") {
        return method_value(name, [s](Interpreter&, CallArgs& a) {
            std::string out;
            bool first = true;
            for (const Value& v : need(a, 0, "iterable", "join").iterate()) {
                if (!v.is_string()) fail("TypeError", "sequence item: expected str instance, " + v.type_name() + " found");
                if (!first) out += s;
                first = false;
                out += v.str();
            }
            return Value::string(std::move(out));
        });
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
        return method_value(name, [s, name](Interpreter&, CallArgs& a) {
            const std::string sub = to_str(need(a, 0, "sub", name));
            if (name == "count") {
                if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
                int64_t n = 0;
                for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
                return Value::integer(n);
            }
            const size_t hit = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
            if (hit == std::string::npos) {
                if (name.find("index") != std::string::npos) fail("ValueError", "substring not found");
                return Value::integer(-1);
            }
            return Value::integer(static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, hit))));
        });
    }
    if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" || name == "isalnum" ||
        name == "isspace" || name == "isupper" || name == "islower") {
        return method_value(name, [s, name](Interpreter&, CallArgs&) {
            const std::u32string u = utf8_decode(s);
            if (u.empty()) return Value::boolean(false);
            auto digit = [](char32_t c) { return c >= '0' && c <= '9'; };
            bool ok = true;
            if (name == "isupper" || name == "islower") {
                bool cased = false;
                for (char32_t c : u) {
                    if (name == "isupper" ? is_lower(c) : is_upper(c)) ok = false;
                    cased = cased || is_upper(c) || is_lower(c);
                }
                return Value::boolean(ok && cased);
            }
            for (char32_t c : u) {
                if (name == "isalpha") ok = ok && is_alpha(c);
                else if (name == "isalnum") ok = ok && (is_alpha(c) || digit(c));
                else if (name == "isspace") ok = ok && is_space(c);
                else ok = ok && digit(c);
            }
            return Value::boolean(ok);
        });
    }
    if (name == "splitlines") {
        return method_value(name, [s](Interpreter&, CallArgs&) {
            List out;
            std::string cur;
            for (size_t i = 0; i < s.size(); ++i) {
                if (s[i] == '\n' || s[i] == '\r') {
                    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
                    out.push_back(Value::string(cur));
                    cur.clear();
                } else {
                    cur.push_back(s[i]);
                }
            }
            if (!cur.empty()) out.push_back(Value::string(cur));
            return Value::list(std::move(out));
        });
    }
    if (name == "zfill" || name == "ljust" || name == "rjust" || name == "center") {
        return method_value(name, [s, name](Interpreter&, CallArgs& a) {
            const int64_t width = need(a, 0, "width", name).as_int();
            const Value* fillv = arg(a, 1, "fillchar");
            const std::string fill = fillv ? to_str(*fillv) : (name == "zfill" ? "0" : " ");
            const int64_t len = static_cast<int64_t>(utf8_length(s));
            if (width <= len) return Value::string(s);
            const int64_t pad = width - len;
            auto rep = [&](int64_t n) {
                std::string r;
                for (int64_t k = 0; k < n; ++k) r += fill;
                return r;
            };
            if (name == "ljust") return Value::string(s + rep(pad));
            if (name == "rjust") return Value::string(rep(pad) + s);
            if (name == "zfill") {
                const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
                return Value::string((sign ? s.substr(0, 1) : "") + rep(pad) + s.substr(sign ? 1 : 0));
            }
            const int64_t left = pad / 2 + (pad & width & 1);
            return Value::string(rep(left) + s + rep(pad - left));
        });
    }
    if (name == "partition" || name == "rpartition") {
        return method_value(name, [s, name](Interpreter&, CallArgs& a) {
            const std::string sep = to_str(need(a, 0, "sep", name));
            const size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
            if (hit == std::string::npos) {
                return name == "partition"
                           ? Value::list({Value::string(s), Value::string(""), Value::string("")}, Kind::kTuple)
                           : Value::list({Value::string(""), Value::string(""), Value::string(s)}, Kind::kTuple);
            }
            return Value::list({Value::string(s.substr(0, hit)), Value::string(sep), Value::string(s.substr(hit + sep.size()))},
                               Kind::kTuple);
        });
    }
    return Value();
}

Value dict_method(const Value& obj, const std::string& name) {
    if (name == "get") {
        return method_value(name, [obj](Interpreter&, CallArgs& a) {
            const Value& key = need(a, 0, "key", "get");
            if (const Value* v = obj.dict_ref().find(key)) return *v;
            const Value* def = arg(a, 1, "default");
            return def ? *def : Value::none();
        });
    }
    if (name == "items" || name == "keys" || name == "values") {
        return method_value(name, [obj, name](Interpreter&, CallArgs&) {
            List out;
            for (const auto& [k, v] : obj.dict_ref().items) {
                if (name == "items") out.push_back(Value::list({k, v}, Kind::kTuple));
                else out.push_back(name == "keys" ? k : v);
            }
            return Value::list(std::move(out));
        });
    }
    if (name == "copy") return method_value(name, [obj](Interpreter&, CallArgs&) { return Value::dict(obj.dict_ref()); });
    return Value();
}

Value list_method(const Value& obj, const std::string& name) {
    if (name == "index" || name == "count") {
        return method_value(name, [obj, name](Interpreter&, CallArgs& a) {
            const Value& x = need(a, 0, "value", name);
            int64_t n = 0;
            for (size_t i = 0; i < obj.items().size(); ++i) {
                if (!equals(obj.items()[i], x)) continue;
                if (name == "index") return Value::integer(static_cast<int64_t>(i));
                ++n;
            }
            if (name == "index") fail("ValueError", to_repr(x) + " is not in list");
            return Value::integer(n);
        });
    }
    if (name == "copy" && obj.kind() == Kind::kList)
        return method_value(name, [obj](Interpreter&, CallArgs&) { return Value::list(obj.items()); });
    return Value();
}

}  // namespace

Value find_method(const Value& obj, const std::string& name) {
    // ImmutableSandboxedEnvironment.modifies_known_mutable
    static const std::set<std::string> kListMutators{"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"};
    static const std::set<std::string> kDictMutators{"clear", "pop", "popitem", "setdefault", "update"};
    const bool is_list = obj.kind() == Kind::kList;
    if ((is_list && kListMutators.count(name)) || (obj.is_mapping() && kDictMutators.count(name)))
        return Value::undefined("SecurityError: access to attribute '" + name + "' of '" + obj.type_name() +
                                "' object is unsafe.");
    if (obj.is_string()) return string_method(obj, name);
    if (obj.is_mapping()) return dict_method(obj, name);
    if (obj.kind() == Kind::kList || obj.kind() == Kind::kTuple) return list_method(obj, name);
    return Value();
}

Value percent_format(const Value& format, const Value& args) {
    const std::string& f = format.str();
    List positional = args.kind() == Kind::kTuple ? args.items() : List{args};
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] != '%') {
            out.push_back(f[i]);
            continue;
        }
        if (++i >= f.size()) fail("ValueError", "incomplete format");
        Value v;
        if (f[i] == '%') {
            out.push_back('%');
            continue;
        }
        if (f[i] == '(') {
            const size_t close = f.find(')', i);
            if (close == std::string::npos || !args.is_mapping()) fail("TypeError", "format requires a mapping");
            const Value* found = args.dict_ref().find(Value::string(f.substr(i + 1, close - i - 1)));
            if (!found) fail("KeyError", "'" + f.substr(i + 1, close - i - 1) + "'");
            v = *found;
            i = close + 1;
        } else {
            if (next >= positional.size()) fail("TypeError", "not enough arguments for format string");
            v = positional[next++];
        }
        std::string spec;
        while (i < f.size() && std::strchr("-+ #0123456789.", f[i])) spec.push_back(f[i++]);
        if (i >= f.size()) fail("ValueError", "incomplete format");
        const char conv = f[i];
        std::string body;
        if (conv == 's') body = to_str(v);
        else if (conv == 'r') body = to_repr(v);
        else if (conv == 'd' || conv == 'i') body = std::to_string(v.as_int());
        else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'g' || conv == 'x' || conv == 'X' || conv == 'o') {
            char buf[128];
            const std::string cfmt = "%" + spec + (conv == 'x' || conv == 'X' || conv == 'o' ? "ll" : "") + std::string(1, conv);
            if (conv == 'x' || conv == 'X' || conv == 'o') std::snprintf(buf, sizeof buf, cfmt.c_str(), static_cast<long long>(v.as_int()));
            else std::snprintf(buf, sizeof buf, cfmt.c_str(), v.as_float());
            out += buf;
            continue;
        } else {
            fail("ValueError", std::string("unsupported format character '") + conv + "'");
        }
        if (format.is_markup() && !v.is_markup()) body = html_escape(body);
        size_t width = 0;
        bool left = spec.find('-') != std::string::npos;
        for (char c : spec)
            if (std::isdigit(static_cast<unsigned char>(c)) && c != '0') {
                width = std::stoul(spec.substr(spec.find(c)));
                break;
            }
        const size_t len = utf8_length(body);
        if (len < width) body = left ? body + std::string(width - len, ' ') : std::string(width - len, ' ') + body;
        out += body;
    }
    if (next < positional.size() && !args.is_mapping())
        fail("TypeError", "not all arguments converted during string formatting");
    return Value::string(std::move(out), format.is_markup());
}

void add_globals(Scope& scope) {
    scope.vars["range"] = method_value("range", [](Interpreter&, CallArgs& a) {
        if (a.args.empty() || a.args.size() > 3) fail("TypeError", "range expected 1 to 3 arguments");
        int64_t start = 0, stop, step = 1;
        if (a.args.size() == 1) {
            stop = a.args[0].as_int();
        } else {
            start = a.args[0].as_int();
            stop = a.args[1].as_int();
            if (a.args.size() == 3) step = a.args[2].as_int();
        }
        if (step == 0) fail("ValueError", "range() arg 3 must not be zero");
        List out;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.size() >= 100000) fail("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
            out.push_back(Value::integer(i));
        }
        return Value::list(std::move(out));
    });
    auto make_dict = [](CallArgs& a, Kind kind) {
        Dict d;
        if (!a.args.empty()) {
            if (!a.args[0].is_mapping()) fail("TypeError", "expected a mapping as the positional argument");
            d = a.args[0].dict_ref();
        }
        for (auto& [k, v] : a.kwargs) d.set(Value::string(k), v);
        return Value::dict(std::move(d), kind);
    };
    scope.vars["dict"] = method_value("dict", [make_dict](Interpreter&, CallArgs& a) { return make_dict(a, Kind::kDict); });
    scope.vars["namespace"] = method_value("namespace", [make_dict](Interpreter&, CallArgs& a) { return make_dict(a, Kind::kNamespace); });
    scope.vars["raise_exception"] = method_value("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
        const Value* msg = arg(a, 0, "message");
        throw TemplateError(TemplateError::Kind::kRaised, msg ? to_str(*msg) : "", "TemplateError");
    });
    scope.vars["strftime_now"] = method_value("strftime_now", [](Interpreter& in, CallArgs& a) {
        const std::string fmt = to_str(need(a, 0, "format", "strftime_now"));
        char buf[512];
        const size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &in.now());
        return Value::string(std::string(buf, n));
    });
}

}  // namespace deskside::models::jinja
