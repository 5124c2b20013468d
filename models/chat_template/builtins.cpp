// jinja2's built-in filters and tests (ref: jinja2 3.1 filters.py, tests.py), with
// transformers' tojson override, plus the template globals. Filters that return generators in
// jinja2 (map, select, selectattr, unique, items, ...) return Kind::kGenerator here so that
// truthiness, len() and tojson fail or succeed exactly as they do in Python.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "models/chat_template/interpreter.h"
#include "models/chat_template/parser.h"
#include "models/chat_template/unicode.h"

namespace deskside::models::jinja {

namespace {

// Argument `pos` (0 = first after the operand) or keyword `name`; nullptr when not given.
const Value* arg(const CallArgs& a, size_t pos, const char* name) {
    for (const auto& [k, v] : a.kwargs)
        if (k == name) return &v;
    return pos < a.args.size() ? &a.args[pos] : nullptr;
}

bool arg_bool(const CallArgs& a, size_t pos, const char* name, bool def) {
    const Value* v = arg(a, pos, name);
    return v ? v->truthy() : def;
}

std::string soft_str(const Value& v) { return to_str(v); }

Value keep_markup(const Value& like, std::string s) { return Value::string(std::move(s), like.is_markup()); }

Value generator(List items) { return Value::list(std::move(items), Kind::kGenerator); }

int64_t py_len(const Value& v) {
    switch (v.kind()) {
        case Kind::kUndefined: return 0;
        case Kind::kString: return static_cast<int64_t>(utf8_length(v.str()));
        case Kind::kList:
        case Kind::kTuple: return static_cast<int64_t>(v.items().size());
        case Kind::kDict: return static_cast<int64_t>(v.dict_ref().items.size());
        default: fail("TypeError", "object of type '" + v.type_name() + "' has no len()");
    }
}

// jinja2's make_attrgetter: "a.b.0" walks attributes/items, integers index.
Value attr_path(Interpreter& in, Value v, const std::string& path) {
    size_t start = 0;
    while (start <= path.size()) {
        const size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
        v = in.getitem(v, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return v;
}

// Sort key for sort/dictsort/min/max/unique: lowercased strings unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return Value::string(str_lower(v.str()));
    return v;
}

Value f_default(Interpreter&, Value& v, CallArgs& a) {
    const Value* def = arg(a, 0, "default_value");
    const bool boolean = arg_bool(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return def ? *def : Value::string("");
    return v;
}

Value f_length(Interpreter&, Value& v, CallArgs&) { return Value::integer(py_len(v)); }

Value f_first(Interpreter&, Value& v, CallArgs&) {
    List items = v.iterate();
    if (items.empty()) return Value::undefined("UndefinedError: No first item, sequence was empty.");
    return items.front();
}

Value f_last(Interpreter&, Value& v, CallArgs&) {
    if (v.kind() == Kind::kGenerator) fail("TypeError", "'generator' object is not reversible");
    List items = v.iterate();
    if (items.empty()) return Value::undefined("UndefinedError: No last item, sequence was empty.");
    return items.back();
}

Value f_join(Interpreter& in, Value& v, CallArgs& a) {
    const Value* sep = arg(a, 0, "d");
    const Value* attribute = arg(a, 1, "attribute");
    std::string out;
    bool first = true;
    for (Value& item : v.iterate()) {
        if (!first && sep) out += to_str(*sep);
        first = false;
        out += to_str(attribute && !attribute->is_none() ? attr_path(in, item, to_str(*attribute)) : item);
    }
    return Value::string(std::move(out));
}

Value f_upper(Interpreter&, Value& v, CallArgs&) { return keep_markup(v, str_upper(soft_str(v))); }
Value f_lower(Interpreter&, Value& v, CallArgs&) { return keep_markup(v, str_lower(soft_str(v))); }

Value f_trim(Interpreter&, Value& v, CallArgs& a) {
    const Value* chars = arg(a, 0, "chars");
    std::string set = chars && !chars->is_none() ? to_str(*chars) : std::string();
    return keep_markup(v, str_strip(soft_str(v), chars && !chars->is_none() ? &set : nullptr, StripSide::kBoth));
}

std::string replace_all(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
    std::string out;
    if (old.empty()) {  // Python inserts `repl` around every character
        const std::u32string u = utf8_decode(s);
        int64_t done = 0;
        for (size_t i = 0; i <= u.size(); ++i) {
            if (count < 0 || done < count) {
                out += repl;
                ++done;
            }
            if (i < u.size()) utf8_append(out, u[i]);
        }
        return out;
    }
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        const size_t hit = s.find(old, pos);
        if (hit == std::string::npos) break;
        out.append(s, pos, hit - pos);
        out += repl;
        pos = hit + old.size();
        ++done;
    }
    out.append(s, pos, std::string::npos);
    return out;
}

Value f_replace(Interpreter&, Value& v, CallArgs& a) {
    const Value* old = arg(a, 0, "old");
    const Value* repl = arg(a, 1, "new");
    const Value* count = arg(a, 2, "count");
    if (!old || !repl) fail("TypeError", "replace() missing required arguments 'old' and 'new'");
    return Value::string(replace_all(to_str(v), to_str(*old), to_str(*repl),
                                     count && !count->is_none() ? count->as_int() : -1));
}

Value f_list(Interpreter&, Value& v, CallArgs&) { return Value::list(v.iterate()); }

Value f_items(Interpreter&, Value& v, CallArgs&) {
    if (v.is_undefined()) return generator({});
    if (!v.is_mapping()) fail("TypeError", "Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, val] : v.dict_ref().items) out.push_back(Value::list({k, val}, Kind::kTuple));
    return generator(std::move(out));
}

Value f_dictsort(Interpreter&, Value& v, CallArgs& a) {
    if (!v.is_mapping()) fail("TypeError", "dictsort filter needs a mapping, got " + v.type_name());
    const bool case_sensitive = arg_bool(a, 0, "case_sensitive", false);
    const Value* by = arg(a, 1, "by");
    const bool by_value = by && to_str(*by) == "value";
    const bool reverse = arg_bool(a, 2, "reverse", false);
    List out;
    for (const auto& [k, val] : v.dict_ref().items) out.push_back(Value::list({k, val}, Kind::kTuple));
    std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
        const size_t i = by_value ? 1 : 0;
        const Value kx = sort_key(x.items()[i], case_sensitive), ky = sort_key(y.items()[i], case_sensitive);
        return reverse ? less(ky, kx) : less(kx, ky);
    });
    return Value::list(std::move(out));
}

Value f_tojson(Interpreter&, Value& v, CallArgs& a) {
    // transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    JsonOptions opt;
    opt.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
    if (const Value* indent = arg(a, 1, "indent"); indent && !indent->is_none()) {
        opt.has_indent = true;
        opt.indent = indent->is_string() ? indent->str() : std::string(static_cast<size_t>(std::max<int64_t>(0, indent->as_int())), ' ');
    }
    if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
        List parts = sep->iterate();
        if (parts.size() != 2) fail("ValueError", "separators must be an (item_separator, key_separator) pair");
        opt.has_separators = true;
        opt.item_separator = to_str(parts[0]);
        opt.key_separator = to_str(parts[1]);
    }
    opt.sort_keys = arg_bool(a, 3, "sort_keys", false);
    return Value::string(json_dumps(v, opt));
}

Value f_string(Interpreter&, Value& v, CallArgs&) { return v.is_markup() ? v : Value::string(to_str(v)); }
Value f_safe(Interpreter&, Value& v, CallArgs&) { return Value::string(to_str(v), true); }
Value f_escape(Interpreter&, Value& v, CallArgs&) {
    return v.is_markup() ? v : Value::string(html_escape(to_str(v)), true);
}
Value f_forceescape(Interpreter&, Value& v, CallArgs&) { return Value::string(html_escape(to_str(v)), true); }

// Python's int(str): optional sign, digits with single underscores, surrounding whitespace.
bool parse_int(const std::string& text, int base, int64_t& out) {
    std::string s = str_strip(text, nullptr, StripSide::kBoth);
    if (s.empty()) return false;
    try {
        size_t used = 0;
        std::string digits;
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '_' && i > 0 && i + 1 < s.size() && std::isalnum(static_cast<unsigned char>(s[i - 1])) &&
                std::isalnum(static_cast<unsigned char>(s[i + 1])))
                continue;
            digits.push_back(s[i]);
        }
        out = std::stoll(digits, &used, base);
        return used == digits.size();
    } catch (const std::exception&) {
        return false;
    }
}

bool parse_float(const std::string& text, double& out) {
    const std::string s = str_strip(text, nullptr, StripSide::kBoth);
    if (s.empty()) return false;
    try {
        size_t used = 0;
        out = std::stod(s, &used);
        return used == s.size();
    } catch (const std::exception&) {
        return false;
    }
}

Value f_int(Interpreter&, Value& v, CallArgs& a) {
    const Value* def = arg(a, 0, "default");
    const Value* base = arg(a, 1, "base");
    const Value fallback = def ? *def : Value::integer(0);
    if (v.is_string()) {
        int64_t i;
        if (parse_int(v.str(), base ? static_cast<int>(base->as_int()) : 10, i)) return Value::integer(i);
        double f;
        if (parse_float(v.str(), f) && std::isfinite(f)) return Value::integer(static_cast<int64_t>(f));
        return fallback;
    }
    if (v.kind() == Kind::kFloat) return std::isfinite(v.as_float()) ? Value::integer(static_cast<int64_t>(v.as_float())) : fallback;
    if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return Value::integer(v.as_int());
    return fallback;
}

Value f_float(Interpreter&, Value& v, CallArgs& a) {
    const Value* def = arg(a, 0, "default");
    if (v.is_number()) return Value::number(v.as_float());
    double f;
    if (v.is_string() && parse_float(v.str(), f)) return Value::number(f);
    return def ? *def : Value::number(0.0);
}

Value f_abs(Interpreter&, Value& v, CallArgs&) {
    if (v.kind() == Kind::kFloat) return Value::number(std::fabs(v.as_float()));
    if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return Value::integer(std::llabs(v.as_int()));
    fail("TypeError", "bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_round(Interpreter&, Value& v, CallArgs& a) {
    const Value* prec = arg(a, 0, "precision");
    const Value* method = arg(a, 1, "method");
    const std::string how = method ? to_str(*method) : "common";
    const double scale = std::pow(10.0, prec ? static_cast<double>(prec->as_int()) : 0.0);
    const double x = v.as_float() * scale;
    double r = how == "ceil" ? std::ceil(x) : how == "floor" ? std::floor(x) : std::round(x);
    return Value::number(r / scale);
}

Value f_capitalize(Interpreter&, Value& v, CallArgs&) {
    std::u32string u = utf8_decode(soft_str(v));
    for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_upper(u[i]) : to_lower(u[i]);
    return keep_markup(v, utf8_encode(u));
}

Value f_title(Interpreter&, Value& v, CallArgs&) {
    // jinja2: split on runs of [-\s({[<], upper-case each piece's first character.
    const std::u32string u = utf8_decode(soft_str(v));
    std::u32string out;
    bool word_start = true;
    for (char32_t cp : u) {
        const bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || is_space(cp);
        if (sep) {
            out.push_back(cp);
            word_start = true;
        } else {
            out.push_back(word_start ? to_upper(cp) : to_lower(cp));
            word_start = false;
        }
    }
    return keep_markup(v, utf8_encode(out));
}

Value f_center(Interpreter&, Value& v, CallArgs& a) {
    const Value* width = arg(a, 0, "width");
    const std::string s = to_str(v);
    const int64_t w = width ? width->as_int() : 80, n = static_cast<int64_t>(utf8_length(s));
    if (w <= n) return Value::string(s);
    const int64_t pad = w - n, left = pad / 2 + (pad & w & 1);  // CPython's centering rule
    return Value::string(std::string(left, ' ') + s + std::string(pad - left, ' '));
}

std::vector<std::string> splitlines(const std::string& s) {
    std::vector<std::string> lines;
    const std::u32string u = utf8_decode(s);
    std::u32string cur;
    for (size_t i = 0; i < u.size(); ++i) {
        const char32_t c = u[i];
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
            c == 0x2029) {
            if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
            lines.push_back(utf8_encode(cur));
            cur.clear();
        } else {
            cur.push_back(c);
        }
    }
    if (!cur.empty()) lines.push_back(utf8_encode(cur));
    return lines;
}

Value f_indent(Interpreter&, Value& v, CallArgs& a) {
    const Value* width = arg(a, 0, "width");
    const bool first = arg_bool(a, 1, "first", false);
    const bool blank = arg_bool(a, 2, "blank", false);
    const std::string indention = width && width->is_string() ? width->str()
                                  : std::string(static_cast<size_t>(width ? std::max<int64_t>(0, width->as_int()) : 4), ' ');
    const std::vector<std::string> lines = splitlines(to_str(v) + "\n");
    std::string rv;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i == 0) {
            rv = lines[0];
            continue;
        }
        rv += "\n";
        if (blank || !lines[i].empty()) rv += indention;
        rv += lines[i];
    }
    if (first) rv = indention + rv;
    return keep_markup(v, rv);
}

// select/reject/selectattr/rejectattr share jinja2's prepare_select_or_reject.
Value select_common(Interpreter& in, Value& v, CallArgs& a, bool by_attr, bool keep_matching) {
    if (!v.truthy()) return generator({});  // jinja2 skips falsy inputs (none included) entirely
    size_t pos = 0;
    std::string attribute;
    if (by_attr) {
        if (a.args.empty()) fail("FilterArgumentError", "Missing parameter for attribute name");
        attribute = to_str(a.args[pos++]);
    }
    TestFn test = nullptr;
    CallArgs test_args;
    if (pos < a.args.size()) {
        const std::string name = to_str(a.args[pos++]);
        test = find_test(name);
        if (!test) fail("TemplateRuntimeError", "No test named '" + name + "' found.");
        test_args.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(pos), a.args.end());
        test_args.kwargs = a.kwargs;
    }
    List out;
    for (Value& item : v.iterate()) {
        const Value probe = by_attr ? attr_path(in, item, attribute) : item;
        const bool ok = test ? test(in, probe, test_args) : probe.truthy();
        if (ok == keep_matching) out.push_back(item);
    }
    return generator(std::move(out));
}

Value f_select(Interpreter& in, Value& v, CallArgs& a) { return select_common(in, v, a, false, true); }
Value f_reject(Interpreter& in, Value& v, CallArgs& a) { return select_common(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, Value& v, CallArgs& a) { return select_common(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, Value& v, CallArgs& a) { return select_common(in, v, a, true, false); }

Value f_map(Interpreter& in, Value& v, CallArgs& a) {
    List out;
    if (!v.truthy()) return generator({});
    const Value* attribute = arg(a, 99, "attribute");
    if (attribute) {
        const Value* def = arg(a, 99, "default");
        for (Value& item : v.iterate()) {
            Value r = attr_path(in, item, to_str(*attribute));
            out.push_back(r.is_undefined() && def ? *def : r);
        }
        return generator(std::move(out));
    }
    if (a.args.empty()) fail("FilterArgumentError", "map requires a filter argument");
    const std::string name = to_str(a.args[0]);
    const FilterFn fn = find_filter(name);
    if (!fn) fail("TemplateRuntimeError", "No filter named '" + name + "' found.");
    CallArgs rest;
    rest.args.assign(a.args.begin() + 1, a.args.end());
    rest.kwargs = a.kwargs;
    for (Value& item : v.iterate()) {
        CallArgs copy = rest;
        out.push_back(fn(in, item, copy));
    }
    return generator(std::move(out));
}

Value f_unique(Interpreter& in, Value& v, CallArgs& a) {
    const bool case_sensitive = arg_bool(a, 0, "case_sensitive", false);
    const Value* attribute = arg(a, 1, "attribute");
    List out, seen;
    for (Value& item : v.iterate()) {
        Value key = sort_key(attribute ? attr_path(in, item, to_str(*attribute)) : item, case_sensitive);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
        seen.push_back(key);
        out.push_back(item);
    }
    return generator(std::move(out));
}

Value f_sort(Interpreter& in, Value& v, CallArgs& a) {
    const bool reverse = arg_bool(a, 0, "reverse", false);
    const bool case_sensitive = arg_bool(a, 1, "case_sensitive", false);
    const Value* attribute = arg(a, 2, "attribute");
    List items = v.iterate();
    auto key = [&](const Value& x) {
        return sort_key(attribute && !attribute->is_none() ? attr_path(in, x, to_str(*attribute)) : x, case_sensitive);
    };
    std::stable_sort(items.begin(), items.end(),
                     [&](const Value& x, const Value& y) { return reverse ? less(key(y), key(x)) : less(key(x), key(y)); });
    return Value::list(std::move(items));
}

Value min_max(Interpreter& in, Value& v, CallArgs& a, bool want_max) {
    const bool case_sensitive = arg_bool(a, 0, "case_sensitive", false);
    const Value* attribute = arg(a, 1, "attribute");
    List items = v.iterate();
    if (items.empty()) return Value::undefined("UndefinedError: No aggregated item, sequence was empty.");
    auto key = [&](const Value& x) {
        return sort_key(attribute && !attribute->is_none() ? attr_path(in, x, to_str(*attribute)) : x, case_sensitive);
    };
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i)
        if (want_max ? less(key(items[best]), key(items[i])) : less(key(items[i]), key(items[best]))) best = i;
    return items[best];
}

Value f_min(Interpreter& in, Value& v, CallArgs& a) { return min_max(in, v, a, false); }
Value f_max(Interpreter& in, Value& v, CallArgs& a) { return min_max(in, v, a, true); }

Value f_sum(Interpreter& in, Value& v, CallArgs& a) {
    const Value* attribute = arg(a, 0, "attribute");
    const Value* start = arg(a, 1, "start");
    Value total = start ? *start : Value::integer(0);
    for (Value& item : v.iterate()) {
        const Value x = attribute && !attribute->is_none() ? attr_path(in, item, to_str(*attribute)) : item;
        if (!total.is_number() || !x.is_number())
            fail("TypeError", "unsupported operand type(s) for +: '" + total.type_name() + "' and '" + x.type_name() + "'");
        total = total.kind() == Kind::kFloat || x.kind() == Kind::kFloat ? Value::number(total.as_float() + x.as_float())
                                                                          : Value::integer(total.as_int() + x.as_int());
    }
    return total;
}

Value f_reverse(Interpreter&, Value& v, CallArgs&) {
    if (v.is_string()) {
        std::u32string u = utf8_decode(v.str());
        std::reverse(u.begin(), u.end());
        return Value::string(utf8_encode(u));
    }
    List items = v.iterate();
    std::reverse(items.begin(), items.end());
    return generator(std::move(items));
}

Value f_attr(Interpreter& in, Value& v, CallArgs& a) {
    const Value* name = arg(a, 0, "name");
    return name ? in.getattr(v, to_str(*name)) : Value();
}

Value f_format(Interpreter&, Value& v, CallArgs& a) {
    if (!a.kwargs.empty()) {
        Dict d;
        for (auto& [k, val] : a.kwargs) d.set(Value::string(k), val);
        return percent_format(v, Value::dict(std::move(d)));
    }
    return percent_format(v, Value::list(a.args, Kind::kTuple));
}

Value f_wordcount(Interpreter&, Value& v, CallArgs&) {
    int64_t n = 0;
    bool in_word = false;
    for (char32_t cp : utf8_decode(to_str(v))) {
        const bool word = cp == '_' || is_alpha(cp) || (cp >= '0' && cp <= '9');
        if (word && !in_word) ++n;
        in_word = word;
    }
    return Value::integer(n);
}

const std::unordered_map<std::string, FilterFn>& filters() {
    static const std::unordered_map<std::string, FilterFn> kFilters{
        {"abs", f_abs},           {"attr", f_attr},         {"capitalize", f_capitalize},
        {"center", f_center},     {"count", f_length},      {"d", f_default},
        {"default", f_default},   {"dictsort", f_dictsort}, {"e", f_escape},
        {"escape", f_escape},     {"first", f_first},       {"float", f_float},
        {"forceescape", f_forceescape}, {"format", f_format}, {"indent", f_indent},
        {"int", f_int},           {"items", f_items},       {"join", f_join},
        {"last", f_last},         {"length", f_length},     {"list", f_list},
        {"lower", f_lower},       {"map", f_map},           {"max", f_max},
        {"min", f_min},           {"reject", f_reject},     {"rejectattr", f_rejectattr},
        {"replace", f_replace},   {"reverse", f_reverse},   {"round", f_round},
        {"safe", f_safe},         {"select", f_select},     {"selectattr", f_selectattr},
        {"sort", f_sort},         {"string", f_string},     {"sum", f_sum},
        {"title", f_title},       {"tojson", f_tojson},     {"trim", f_trim},
        {"unique", f_unique},     {"upper", f_upper},       {"wordcount", f_wordcount},
    };
    return kFilters;
}

// ---- tests ----------------------------------------------------------------------------------

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kBool; }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kBool && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kBool && !v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kInt; }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kFloat; }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_mapping(); }
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kCallable; }
bool t_escaped(Interpreter&, const Value& v, CallArgs&) { return v.is_markup(); }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
    return v.is_undefined() || v.is_string() || v.is_sequence_like() || v.is_mapping();
}
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
    return v.is_undefined() || v.is_string() || v.kind() == Kind::kList || v.kind() == Kind::kTuple || v.is_mapping();
}

const Value& test_arg(const CallArgs& a, const char* test) {
    if (a.args.empty()) fail("TypeError", std::string(test) + "() missing 1 required positional argument");
    return a.args[0];
}

bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return equals(v, test_arg(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !equals(v, test_arg(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return less(v, test_arg(a, "lt")); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return less(test_arg(a, "gt"), v); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return !less(test_arg(a, "le"), v); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return !less(v, test_arg(a, "ge")); }
bool t_in(Interpreter&, const Value& v, CallArgs& a) { return contains(test_arg(a, "in"), v); }
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
    const Value& o = test_arg(a, "sameas");
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.kind() == Kind::kBool || v.kind() == Kind::kInt) return v.as_int() == o.as_int();
    if (v.is_string()) return v.str() == o.str();
    if (v.is_sequence_like()) return &v.items() == &o.items();
    if (v.is_mapping() || v.kind() == Kind::kNamespace) return &v.dict_ref() == &o.dict_ref();
    return false;
}
bool t_odd(Interpreter&, const Value& v, CallArgs&) { return v.as_int() % 2 != 0; }
bool t_even(Interpreter&, const Value& v, CallArgs&) { return v.as_int() % 2 == 0; }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
    const int64_t d = test_arg(a, "divisibleby").as_int();
    if (d == 0) fail("ZeroDivisionError", "integer modulo by zero");
    return v.as_int() % d == 0;
}
bool t_lower(Interpreter&, const Value& v, CallArgs&) {
    const std::string s = to_str(v);
    return str_lower(s) == s && str_upper(s) != s;
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
    const std::string s = to_str(v);
    return str_upper(s) == s && str_lower(s) != s;
}
bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_filter(v.str()) != nullptr; }
bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_test(v.str()) != nullptr; }

const std::unordered_map<std::string, TestFn>& tests() {
    static const std::unordered_map<std::string, TestFn> kTests{
        {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none},       {"boolean", t_boolean},
        {"true", t_true},       {"false", t_false},         {"integer", t_integer}, {"float", t_float},
        {"number", t_number},   {"string", t_string},       {"mapping", t_mapping}, {"callable", t_callable},
        {"escaped", t_escaped}, {"iterable", t_iterable},   {"sequence", t_sequence}, {"eq", t_eq},
        {"equalto", t_eq},      {"==", t_eq},               {"ne", t_ne},           {"!=", t_ne},
        {"lt", t_lt},           {"lessthan", t_lt},         {"<", t_lt},            {"gt", t_gt},
        {"greaterthan", t_gt},  {">", t_gt},                {"le", t_le},           {"<=", t_le},
        {"ge", t_ge},           {">=", t_ge},               {"in", t_in},           {"sameas", t_sameas},
        {"odd", t_odd},         {"even", t_even},           {"divisibleby", t_divisibleby},
        {"lower", t_lower},     {"upper", t_upper},         {"filter", t_filter},   {"test", t_test},
    };
    return kTests;
}

}  // namespace

FilterFn find_filter(const std::string& name) {
    auto it = filters().find(name);
    return it == filters().end() ? nullptr : it->second;
}

TestFn find_test(const std::string& name) {
    auto it = tests().find(name);
    return it == tests().end() ? nullptr : it->second;
}

bool has_filter(const std::string& name) { return find_filter(name) != nullptr; }
bool has_test(const std::string& name) { return find_test(name) != nullptr; }

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Kind::kString:
            if (!item.is_string())
                fail("TypeError", "'in <string>' requires string as left operand, not " + item.type_name());
            return container.str().find(item.str()) != std::string::npos;
        case Kind::kDict: return container.dict_ref().find(item) != nullptr;
        case Kind::kUndefined:
        case Kind::kList:
        case Kind::kTuple:
        case Kind::kGenerator: {
            const List items = container.iterate();
            return std::any_of(items.begin(), items.end(), [&](const Value& x) { return equals(x, item); });
        }
        default: fail("TypeError", "argument of type '" + container.type_name() + "' is not iterable");
    }
}

}  // namespace deskside::models::jinja
