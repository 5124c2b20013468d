// JSON Schema -> grammar (see json_schema.h for the keywords and the output form).
// ref: JSON Schema 2020-12 core and validation; RFC 8259 (JSON); RFC 3339 (date, time);
// RFC 4122 (uuid); RFC 5321 dot-atom (email); RFC 3629 (UTF-8).
#include "engine/json_schema.h"

#include <cmath>
#include <map>
#include <set>

namespace deskside::engine {

using json = nlohmann::ordered_json;
using Rule = GrammarBuilder::Rule;

namespace {

std::bitset<256> bytes_between(int lo, int hi) {
    std::bitset<256> s;
    for (int b = lo; b <= hi; ++b) s.set(b);
    return s;
}

// The plain characters a JSON string may hold unescaped, ASCII part.
std::bitset<256> plain_ascii() {
    std::bitset<256> s = bytes_between(0x20, 0x7f);
    s.reset('"');
    s.reset('\\');
    return s;
}

}  // namespace

GrammarBuilder::Rule utf8_multibyte(GrammarBuilder& b) {
    const Rule cont = b.byte_range(0x80, 0xbf);
    return b.choice({
        b.sequence({b.byte_range(0xc2, 0xdf), cont}),
        b.sequence({b.literal("\xe0"), b.byte_range(0xa0, 0xbf), cont}),
        b.sequence({b.byte_range(0xe1, 0xec), cont, cont}),
        b.sequence({b.literal("\xed"), b.byte_range(0x80, 0x9f), cont}),
        b.sequence({b.byte_range(0xee, 0xef), cont, cont}),
        b.sequence({b.literal("\xf0"), b.byte_range(0x90, 0xbf), cont, cont}),
        b.sequence({b.byte_range(0xf1, 0xf3), cont, cont, cont}),
        b.sequence({b.literal("\xf4"), b.byte_range(0x80, 0x8f), cont, cont}),
    });
}

GrammarBuilder::Rule json_string_char(GrammarBuilder& b) {
    std::bitset<256> hex = bytes_between('0', '9') | bytes_between('a', 'f') | bytes_between('A', 'F');
    const Rule h = b.byte_set(hex);
    // \uXXXX without D800-DFFF: first digit not d/D, or d/D followed by 0-7.
    std::bitset<256> first = hex;
    first.reset('d');
    first.reset('D');
    std::bitset<256> dd;
    dd.set('d');
    dd.set('D');
    const Rule u = b.sequence({b.literal("u"), b.choice({b.sequence({b.byte_set(first), h, h, h}),
                                                         b.sequence({b.byte_set(dd), b.byte_range('0', '7'), h, h})})});
    std::bitset<256> short_escape;
    for (char c : std::string("\"\\/bfnrt")) short_escape.set(static_cast<unsigned char>(c));
    const Rule escape = b.sequence({b.literal("\\"), b.choice({b.byte_set(short_escape), u})});
    return b.choice({b.byte_set(plain_ascii()), escape, utf8_multibyte(b)});
}

GrammarBuilder::Rule json_whitespace(GrammarBuilder& b) {
    return b.choice(
        {b.literal(""), b.literal(" "), b.sequence({b.literal("\n"), b.repeat(b.literal(" "), 0, kMaxIndent)})});
}

namespace {

// The pieces of JSON text every schema rule is made of, made once per builder use.
struct JsonParts {
    explicit JsonParts(GrammarBuilder& builder)
        : b(builder),
          ws(json_whitespace(b)),
          comma(b.sequence({b.literal(","), ws})),
          colon(b.sequence({b.literal(":"), ws})),
          digit(b.byte_range('0', '9')),
          str_char(json_string_char(b)) {}

    Rule string(int64_t min, int64_t max) {
        return b.sequence({b.literal("\""), b.repeat(str_char, min, max), b.literal("\"")});
    }
    Rule number() {
        const Rule integer_part =
            b.choice({b.literal("0"), b.sequence({b.byte_range('1', '9'), b.repeat(digit, 0, -1)})});
        std::bitset<256> sign;
        sign.set('+');
        sign.set('-');
        std::bitset<256> e;
        e.set('e');
        e.set('E');
        const Rule fraction = b.sequence({b.literal("."), b.repeat(digit, 1, -1)});
        const Rule exponent = b.sequence({b.byte_set(e), b.repeat(b.byte_set(sign), 0, 1), b.repeat(digit, 1, -1)});
        return b.sequence(
            {b.repeat(b.literal("-"), 0, 1), integer_part, b.repeat(fraction, 0, 1), b.repeat(exponent, 0, 1)});
    }
    // "[" ws (items) ws "]" / "{" ws (members) ws "}" with `first` the non-empty list.
    Rule bracketed(const char* open, const char* close, std::optional<Rule> list, bool may_be_empty) {
        std::vector<Rule> alts;
        if (may_be_empty) alts.push_back(b.sequence({b.literal(open), ws, b.literal(close)}));
        if (list) alts.push_back(b.sequence({b.literal(open), ws, *list, ws, b.literal(close)}));
        return b.choice(std::move(alts));
    }
    Rule any_value() {
        const Rule value = b.forward();
        const Rule member = b.sequence({string(0, -1), colon, value});
        const Rule object = bracketed("{", "}", b.repeat(member, 1, -1, comma), true);
        const Rule array = bracketed("[", "]", b.repeat(value, 1, -1, comma), true);
        b.define(value, b.choice({object, array, string(0, -1), number(), b.literal("true"), b.literal("false"),
                                  b.literal("null")}));
        return value;
    }

    GrammarBuilder& b;
    Rule ws, comma, colon, digit, str_char;
};

}  // namespace

GrammarBuilder::Rule GrammarBuilder::any_json_value() {
    if (!any_value_) any_value_ = JsonParts(*this).any_value();
    return *any_value_;
}

GrammarBuilder::Rule GrammarBuilder::any_json_object() {
    JsonParts p(*this);
    const Rule member = sequence({p.string(0, -1), p.colon, any_json_value()});
    return p.bracketed("{", "}", repeat(member, 1, -1, p.comma), true);
}

GrammarBuilder::Rule GrammarBuilder::json_schema(const nlohmann::ordered_json& schema) {
    return compile_json_schema(*this, schema);
}

// ---- the schema compiler ----------------------------------------------------------------------

namespace {

const std::set<std::string> kAnnotations = {"title",    "description", "default",  "examples",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};
const std::set<std::string> kKeywords = {"type",
                                         "properties",
                                         "required",
                                         "additionalProperties",
                                         "enum",
                                         "const",
                                         "items",
                                         "prefixItems",
                                         "additionalItems",
                                         "minItems",
                                         "maxItems",
                                         "uniqueItems",
                                         "anyOf",
                                         "oneOf",
                                         "allOf",
                                         "$ref",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "format",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum",
                                         "nullable"};

// JSON types as bits; a schema's possible types is a set of them.
enum TypeBit : unsigned { kNull = 1, kBoolean = 2, kObject = 4, kArray = 8, kString = 16, kInteger = 32, kNumber = 64 };
constexpr unsigned kAllTypes = 127;

const std::map<std::string, unsigned> kTypeNames = {{"null", kNull},    {"boolean", kBoolean}, {"object", kObject},
                                                    {"array", kArray},  {"string", kString},   {"integer", kInteger},
                                                    {"number", kNumber}};

std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

unsigned value_type(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return kNull;
        case json::value_t::boolean: return kBoolean;
        case json::value_t::object: return kObject;
        case json::value_t::array: return kArray;
        case json::value_t::string: return kString;
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return kInteger;
        case json::value_t::number_float: return std::floor(v.get<double>()) == v.get<double>() ? kInteger : kNumber;
        default: return 0;
    }
}

// Whether two type sets can share a value (an integer is also a number).
bool overlap(unsigned a, unsigned b) {
    const auto widen = [](unsigned t) { return (t & kNumber) ? t | kInteger : t; };
    return (widen(a) & widen(b)) != 0;
}

bool constrains(const json& s) {
    for (const auto& [k, v] : s.items()) {
        if (!kAnnotations.count(k)) return true;
    }
    return false;
}

class SchemaCompiler {
   public:
    SchemaCompiler(GrammarBuilder& b, const json& root) : b_(b), root_(root), p_(b) {}

    Rule compile(const json& s, const std::string& path) {
        if (s.is_boolean()) {
            if (s.get<bool>()) return b_.any_json_value();
            throw SchemaError(path, "false", "the schema false admits no value");
        }
        if (!s.is_object()) throw SchemaError(path, "", "a schema must be an object or a boolean");
        for (const auto& [k, v] : s.items()) {
            if (!kAnnotations.count(k) && !kKeywords.count(k)) {
                throw SchemaError(join(path, k), k, "keyword '" + k + "' is not supported");
            }
        }
        if (s.contains("allOf")) return compile(merge_all(s, path, 0), path);
        if (s.contains("$ref")) {
            for (const auto& [k, v] : s.items()) {
                if (k != "$ref" && !kAnnotations.count(k)) {
                    throw SchemaError(join(path, k), k, "'" + k + "' beside $ref is not supported");
                }
            }
            return ref(s["$ref"], join(path, "$ref"));
        }
        if (s.contains("anyOf") || s.contains("oneOf")) return compile_alternatives(s, path);
        if (s.value("nullable", false)) {
            json rest = s;
            rest.erase("nullable");
            return b_.choice({compile(rest, path), b_.literal("null")});
        }
        if (s.contains("enum") || s.contains("const")) return compile_enum(s, path);
        const unsigned types = type_set(s, path);
        std::vector<Rule> alts;
        if (types & kNull) alts.push_back(b_.literal("null"));
        if (types & kBoolean) alts.push_back(b_.choice({b_.literal("true"), b_.literal("false")}));
        if (types & kObject) alts.push_back(compile_object(s, path));
        if (types & kArray) alts.push_back(compile_array(s, path));
        if (types & kString) alts.push_back(compile_string(s, path));
        if (types & kNumber) {
            for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
                if (s.contains(k))
                    throw SchemaError(join(path, k), k, std::string(k) + " is enforced on integers only");
            }
            alts.push_back(p_.number());
        } else if (types & kInteger) {
            alts.push_back(compile_integer(s, path));
        }
        return b_.choice(std::move(alts));
    }

   private:
    // The types the schema allows: its `type`, else the types its keywords talk about (a schema with
    // only `properties` yields objects: a narrowing, every output stays valid), else all.
    unsigned type_set(const json& s, const std::string& path) const {
        if (s.contains("type")) {
            const json& t = s["type"];
            unsigned set = 0;
            for (const json& name : t.is_array() ? t : json::array({t})) {
                const auto it = name.is_string() ? kTypeNames.find(name.get<std::string>()) : kTypeNames.end();
                if (it == kTypeNames.end())
                    throw SchemaError(join(path, "type"), "type", "unknown type " + name.dump());
                set |= it->second;
            }
            if (!set) throw SchemaError(join(path, "type"), "type", "an empty type list admits no value");
            return set;
        }
        unsigned set = 0;
        for (const char* k : {"properties", "required", "additionalProperties"}) {
            if (s.contains(k)) set |= kObject;
        }
        for (const char* k : {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"}) {
            if (s.contains(k)) set |= kArray;
        }
        for (const char* k : {"minLength", "maxLength", "pattern", "format"}) {
            if (s.contains(k)) set |= kString;
        }
        for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
            if (s.contains(k)) set |= kInteger;
        }
        return set ? set : kAllTypes;
    }

    // The possible types of a schema, looking through $ref, anyOf and oneOf (for the oneOf check).
    unsigned possible_types(const json& s, const std::string& path, int depth) {
        if (depth > 32 || s.is_boolean()) return kAllTypes;
        if (!s.is_object()) return kAllTypes;
        if (s.contains("$ref")) return possible_types(resolve(s["$ref"], path), path, depth + 1);
        if (s.contains("enum") || s.contains("const")) {
            unsigned set = 0;
            for (const json& v : enum_values(s, path)) set |= value_type(v);
            return set;
        }
        unsigned set = type_set(s, path);
        for (const char* k : {"anyOf", "oneOf"}) {
            if (!s.contains(k) || !s[k].is_array()) continue;
            unsigned alts = 0;
            for (const json& a : s[k]) alts |= possible_types(a, path, depth + 1);
            set &= alts;
        }
        if (s.value("nullable", false)) set |= kNull;
        return set;
    }

    // A property that an object alternative requires with one constant value (a discriminator).
    static std::map<std::string, json> constants(const json& s) {
        std::map<std::string, json> out;
        if (!s.is_object() || !s.contains("properties") || !s.contains("required")) return out;
        for (const json& name : s["required"]) {
            if (!name.is_string() || !s["properties"].contains(name.get<std::string>())) continue;
            const json& p = s["properties"][name.get<std::string>()];
            if (!p.is_object()) continue;
            if (p.contains("const")) out[name.get<std::string>()] = p["const"];
            if (p.contains("enum") && p["enum"].is_array() && p["enum"].size() == 1) {
                out[name.get<std::string>()] = p["enum"][0];
            }
        }
        return out;
    }

    // anyOf is a choice. oneOf is compiled as the same choice, which is right only when no value can
    // match two alternatives: accepted when the alternatives' types are pairwise disjoint, or when two
    // object alternatives are told apart by a required property with different constant values;
    // otherwise SchemaError. Keywords beside anyOf / oneOf are merged into each alternative.
    Rule compile_alternatives(const json& s, const std::string& path) {
        const bool one_of = s.contains("oneOf");
        if (one_of && s.contains("anyOf")) throw SchemaError(join(path, "oneOf"), "oneOf", "oneOf beside anyOf");
        const std::string key = one_of ? "oneOf" : "anyOf";
        const json& alts = s[key];
        if (!alts.is_array() || alts.empty()) {
            throw SchemaError(join(path, key), key, key + " must be a non-empty array");
        }
        json siblings = s;
        siblings.erase(key);
        std::vector<json> merged;
        for (size_t i = 0; i < alts.size(); ++i) {
            const std::string at = join(join(path, key), std::to_string(i));
            merged.push_back(constrains(siblings) ? merge_all(json{{"allOf", json::array({siblings, alts[i]})}}, at, 0)
                                                  : alts[i]);
        }
        if (one_of) check_disjoint(merged, join(path, key));
        std::vector<Rule> rules;
        for (size_t i = 0; i < merged.size(); ++i) {
            rules.push_back(compile(merged[i], join(join(path, key), std::to_string(i))));
        }
        return b_.choice(std::move(rules));
    }

    void check_disjoint(const std::vector<json>& alts, const std::string& path) {
        for (size_t i = 0; i < alts.size(); ++i) {
            for (size_t j = i + 1; j < alts.size(); ++j) {
                const unsigned ti = possible_types(alts[i], path, 0);
                const unsigned tj = possible_types(alts[j], path, 0);
                if (!overlap(ti, tj)) continue;
                bool told_apart = false;
                if (ti == kObject && tj == kObject) {
                    const auto ci = constants(deref(alts[i], path));
                    const auto cj = constants(deref(alts[j], path));
                    for (const auto& [name, v] : ci) {
                        if (cj.count(name) && cj.at(name) != v) told_apart = true;
                    }
                }
                if (!told_apart) {
                    throw SchemaError(path, "oneOf",
                                      "alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                                          " may match the same value (oneOf needs disjoint types or a constant "
                                          "discriminator property)");
                }
            }
        }
    }

    const json& deref(const json& s, const std::string& path) {
        const json* cur = &s;
        for (int i = 0; i < 32 && cur->is_object() && cur->contains("$ref"); ++i) cur = &resolve((*cur)["$ref"], path);
        return *cur;
    }

    const json& resolve(const json& ref, const std::string& path) {
        if (!ref.is_string()) throw SchemaError(path, "$ref", "$ref must be a string");
        const std::string r = ref.get<std::string>();
        if (r.empty() || r[0] != '#')
            throw SchemaError(path, "$ref", "only references into the schema (#...) are supported: " + r);
        try {
            return root_.at(json::json_pointer(r.substr(1)));
        } catch (const json::exception&) {
            throw SchemaError(path, "$ref", "unresolved reference " + r);
        }
    }

    Rule ref(const json& ref_value, const std::string& path) {
        const json& target = resolve(ref_value, path);
        const std::string r = ref_value.get<std::string>();
        if (const auto it = refs_.find(r); it != refs_.end()) return it->second;
        const Rule fwd = b_.forward();
        refs_[r] = fwd;
        std::string target_path = r.size() > 2 ? r.substr(2) : "";
        for (char& c : target_path) {
            if (c == '/') c = '.';
        }
        b_.define(fwd, compile(target, target_path));
        return fwd;
    }

    // allOf: the schema and all its allOf branches (through $ref) folded into one schema.
    json merge_all(const json& s, const std::string& path, int depth) {
        if (depth > 32) throw SchemaError(path, "allOf", "allOf nested too deeply");
        json base = s;
        base.erase("allOf");
        if (!s["allOf"].is_array()) throw SchemaError(join(path, "allOf"), "allOf", "allOf must be an array");
        for (size_t i = 0; i < s["allOf"].size(); ++i) {
            const std::string at = join(join(path, "allOf"), std::to_string(i));
            json branch = s["allOf"][i];
            if (branch.is_boolean()) {
                if (branch.get<bool>()) continue;
                throw SchemaError(at, "false", "the schema false admits no value");
            }
            if (branch.is_object() && branch.contains("$ref")) {
                json rest = branch;
                rest.erase("$ref");
                json target = resolve(branch["$ref"], at);
                branch = merge(target, rest, at);
            }
            if (branch.is_object() && branch.contains("allOf")) branch = merge_all(branch, at, depth + 1);
            base = merge(base, branch, at);
        }
        return base;
    }

    static bool restricts_extras(const json& s) {
        return s.is_object() && s.contains("additionalProperties") && s["additionalProperties"] != json(true);
    }

    // Both schemas at once. Keywords on one side only are taken as they are; shared ones must be
    // equal or have an obvious meet (bounds, type lists, required lists, per-property schemas).
    json merge(const json& a, const json& b, const std::string& path) {
        if (!a.is_object() || !b.is_object()) throw SchemaError(path, "allOf", "allOf branches must be schemas");
        // Properties one side adds would be "additional" to the other's additionalProperties.
        for (const auto& [x, y] : {std::pair<const json*, const json*>{&a, &b}, {&b, &a}}) {
            if (!restricts_extras(*x) || !y->contains("properties")) continue;
            for (const auto& [name, sub] : (*y)["properties"].items()) {
                if (!x->contains("properties") || !(*x)["properties"].contains(name)) {
                    throw SchemaError(join(path, "additionalProperties"), "additionalProperties",
                                      "allOf adds property '" + name + "' that another branch forbids");
                }
            }
        }
        json out = a;
        for (const auto& [k, v] : b.items()) {
            if (!out.contains(k) || kAnnotations.count(k)) {
                out[k] = v;
            } else if (out[k] == v) {
                continue;
            } else if (k == "properties") {
                for (const auto& [name, sub] : v.items()) {
                    out[k][name] = out[k].contains(name) ? json{{"allOf", json::array({out[k][name], sub})}} : sub;
                }
            } else if (k == "required") {
                for (const json& name : v) {
                    if (std::find(out[k].begin(), out[k].end(), name) == out[k].end()) out[k].push_back(name);
                }
            } else if (k == "type") {
                unsigned ta = type_set(json{{"type", out[k]}}, path), tb = type_set(json{{"type", v}}, path);
                if ((ta & kNumber) && (tb & kInteger)) ta |= kInteger;
                if ((tb & kNumber) && (ta & kInteger)) tb |= kInteger;
                const unsigned both = ta & tb;
                if (!both) throw SchemaError(join(path, "type"), "type", "allOf branches share no type");
                json names = json::array();
                for (const auto& [name, bit] : kTypeNames) {
                    if (both & bit) names.push_back(name);
                }
                out[k] = names;
            } else if ((k == "minimum" || k == "minLength" || k == "minItems" || k == "exclusiveMinimum") &&
                       v.is_number() && out[k].is_number()) {
                out[k] = std::max(out[k].get<double>(), v.get<double>()) == v.get<double>() ? v : out[k];
            } else if ((k == "maximum" || k == "maxLength" || k == "maxItems" || k == "exclusiveMaximum") &&
                       v.is_number() && out[k].is_number()) {
                out[k] = std::min(out[k].get<double>(), v.get<double>()) == v.get<double>() ? v : out[k];
            } else {
                throw SchemaError(join(path, k), k, "allOf branches disagree on '" + k + "'");
            }
        }
        return out;
    }

    std::vector<json> enum_values(const json& s, const std::string& path) const {
        if (s.contains("const")) return {s["const"]};
        if (!s["enum"].is_array() || s["enum"].empty()) {
            throw SchemaError(join(path, "enum"), "enum", "enum must be a non-empty array");
        }
        return std::vector<json>(s["enum"].begin(), s["enum"].end());
    }

    Rule compile_enum(const json& s, const std::string& path) {
        for (const auto& [k, v] : s.items()) {
            if (k != "enum" && k != "const" && k != "type" && !kAnnotations.count(k)) {
                throw SchemaError(join(path, k), k, "'" + k + "' beside enum / const is not supported");
            }
        }
        unsigned types = s.contains("type") ? type_set(s, path) : kAllTypes;
        if (types & kNumber) types |= kInteger;
        std::vector<Rule> alts;
        for (const json& v : enum_values(s, path)) {
            if (value_type(v) & types) alts.push_back(b_.literal(v.dump()));
        }
        if (alts.empty()) throw SchemaError(join(path, "enum"), "enum", "no enum value has an allowed type");
        return b_.choice(std::move(alts));
    }

    static int64_t count(const json& s, const char* k, int64_t fallback, const std::string& path) {
        if (!s.contains(k)) return fallback;
        const json& v = s[k];
        if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>()) {
            throw SchemaError(join(path, k), k, std::string(k) + " must be a non-negative integer");
        }
        return static_cast<int64_t>(v.get<double>());
    }

    Rule compile_string(const json& s, const std::string& path) {
        const int64_t min = count(s, "minLength", 0, path);
        const int64_t max = count(s, "maxLength", -1, path);
        if (max >= 0 && max < min) throw SchemaError(join(path, "maxLength"), "maxLength", "maxLength < minLength");
        const bool has_length = s.contains("minLength") || s.contains("maxLength");
        for (const char* k : {"format", "pattern"}) {
            if (!s.contains(k)) continue;
            if (!s[k].is_string()) throw SchemaError(join(path, k), k, std::string(k) + " must be a string");
            if (has_length) throw SchemaError(join(path, k), k, std::string(k) + " with minLength / maxLength");
        }
        if (s.contains("format") && s.contains("pattern")) {
            throw SchemaError(join(path, "pattern"), "pattern", "pattern with format");
        }
        if (s.contains("format")) return json_format_string(b_, s["format"].get<std::string>(), join(path, "format"));
        if (s.contains("pattern"))
            return json_pattern_string(b_, s["pattern"].get<std::string>(), join(path, "pattern"));
        return p_.string(min, max);
    }

    Rule compile_integer(const json& s, const std::string& path) {
        std::optional<int64_t> lo, hi;
        const auto bound = [&](const char* k, bool lower, bool exclusive) {
            if (!s.contains(k)) return;
            const json& v = s[k];
            if (!v.is_number()) throw SchemaError(join(path, k), k, std::string(k) + " must be a number");
            const double x = v.get<double>();
            if (std::fabs(x) > 9.0e18) throw SchemaError(join(path, k), k, std::string(k) + " out of range");
            // The nearest integer inside the bound; integral json values keep their exact int64.
            int64_t n =
                v.is_number_float() ? static_cast<int64_t>(lower ? std::ceil(x) : std::floor(x)) : v.get<int64_t>();
            if (exclusive && static_cast<double>(n) == x) n += lower ? 1 : -1;
            if (lower) lo = lo ? std::max(*lo, n) : n;
            if (!lower) hi = hi ? std::min(*hi, n) : n;
        };
        bound("minimum", true, false);
        bound("exclusiveMinimum", true, true);
        bound("maximum", false, false);
        bound("exclusiveMaximum", false, true);
        if (lo && hi && *lo > *hi) throw SchemaError(join(path, "maximum"), "maximum", "no integer within the bounds");
        return json_integer_range(b_, lo, hi);
    }

    Rule compile_array(const json& s, const std::string& path) {
        if (s.contains("uniqueItems") && s["uniqueItems"] != json(false)) {
            throw SchemaError(join(path, "uniqueItems"), "uniqueItems", "uniqueItems: true is not supported");
        }
        std::vector<Rule> prefix;
        json rest_schema = true;
        std::string rest_path = join(path, "items");
        if (s.contains("prefixItems") || (s.contains("items") && s["items"].is_array())) {
            const char* k = s.contains("prefixItems") ? "prefixItems" : "items";
            if (!s[k].is_array()) throw SchemaError(join(path, k), k, std::string(k) + " must be an array");
            for (size_t i = 0; i < s[k].size(); ++i)
                prefix.push_back(compile(s[k][i], join(join(path, k), std::to_string(i))));
            const char* more = s.contains("prefixItems") ? "items" : "additionalItems";
            if (s.contains(more)) rest_schema = s[more];
            rest_path = join(path, more);
        } else if (s.contains("items")) {
            rest_schema = s["items"];
        }
        const int64_t k = static_cast<int64_t>(prefix.size());
        const int64_t min = count(s, "minItems", 0, path);
        int64_t max = count(s, "maxItems", -1, path);
        const bool rest_allowed = rest_schema != json(false);
        if (!rest_allowed) max = max < 0 ? k : std::min(max, k);
        if (max >= 0 && max < min)
            throw SchemaError(join(path, "minItems"), "minItems", "no array length fits the bounds");
        if (max == 0) return p_.bracketed("[", "]", std::nullopt, true);
        const std::optional<Rule> rest =
            rest_allowed ? std::optional<Rule>(compile(rest_schema, rest_path)) : std::nullopt;
        // tail(i): the items after the first i, each with its leading comma.
        const std::function<Rule(int64_t)> tail = [&](int64_t i) -> Rule {
            if (i >= k) {
                if (!rest) return b_.literal("");
                const int64_t lo = std::max<int64_t>(0, min - i);
                return b_.repeat(b_.sequence({p_.comma, *rest}), lo, max < 0 ? -1 : max - i);
            }
            if (max >= 0 && i >= max) return b_.literal("");
            const Rule more = b_.sequence({p_.comma, prefix[i], tail(i + 1)});
            return i >= min ? b_.choice({b_.literal(""), more}) : more;
        };
        const Rule items =
            k > 0 ? b_.sequence({prefix[0], tail(1)}) : b_.repeat(*rest, std::max<int64_t>(1, min), max, p_.comma);
        return p_.bracketed("[", "]", items, min == 0);
    }

    // A property name for additionalProperties: any string when the object has no fixed properties;
    // else plain ASCII characters only (no escapes, which could spell a fixed name another way) and
    // never one of the fixed names.
    Rule extra_key(const std::vector<std::string>& names) {
        if (names.empty()) return p_.string(0, -1);
        const std::bitset<256> plain = plain_ascii();
        const Rule any_plain = b_.repeat(b_.byte_set(plain), 0, -1);
        struct Trie {
            std::map<unsigned char, size_t> kids;
            bool end = false;
        };
        std::vector<Trie> t(1);
        for (const std::string& n : names) {
            if (!std::all_of(n.begin(), n.end(), [&](char c) { return plain[static_cast<unsigned char>(c)]; }))
                continue;
            size_t at = 0;
            for (unsigned char c : n) {
                if (!t[at].kids.count(c)) {
                    t[at].kids[c] = t.size();
                    t.emplace_back();
                }
                at = t[at].kids[c];
            }
            t[at].end = true;
        }
        const std::function<Rule(size_t)> rest = [&](size_t at) -> Rule {
            std::vector<Rule> alts;
            if (!t[at].end) alts.push_back(b_.literal(""));
            std::bitset<256> other = plain;
            for (const auto& [c, next] : t[at].kids) {
                other.reset(c);
                alts.push_back(b_.sequence({b_.literal(std::string(1, static_cast<char>(c))), rest(next)}));
            }
            if (other.any()) alts.push_back(b_.sequence({b_.byte_set(other), any_plain}));
            return b_.choice(std::move(alts));
        };
        return b_.sequence({b_.literal("\""), rest(0), b_.literal("\"")});
    }

    Rule compile_object(const json& s, const std::string& path) {
        const json props = s.value("properties", json::object());
        if (!props.is_object())
            throw SchemaError(join(path, "properties"), "properties", "properties must be an object");
        const json required = s.value("required", json::array());
        if (!required.is_array()) throw SchemaError(join(path, "required"), "required", "required must be an array");
        for (const json& r : required) {
            if (!r.is_string() || !props.contains(r.get<std::string>())) {
                throw SchemaError(join(path, "required"), "required",
                                  "required property " + r.dump() + " is not among the properties");
            }
        }
        struct Member {
            Rule rule;
            bool required;
        };
        std::vector<Member> members;
        std::vector<std::string> names;
        for (const auto& [name, sub] : props.items()) {
            const bool req = std::find(required.begin(), required.end(), json(name)) != required.end();
            members.push_back({b_.sequence({b_.literal(json(name).dump()), p_.colon,
                                            compile(sub, join(join(path, "properties"), name))}),
                               req});
            names.push_back(name);
        }
        std::optional<Rule> extra;
        const json additional = s.value("additionalProperties", json(false));
        if (additional != json(false)) {
            const Rule value = compile(additional, join(path, "additionalProperties"));
            extra = b_.sequence({extra_key(names), p_.colon, value});
        }
        // tail(i): members from i on, each with its leading comma; first(i): the same with at
        // least one member and no comma before the first; nullopt when nothing can be written.
        const size_t n = members.size();
        std::vector<Rule> tail(n + 1);
        std::vector<std::optional<Rule>> first(n + 1);
        tail[n] = extra ? b_.repeat(b_.sequence({p_.comma, *extra}), 0, -1) : b_.literal("");
        if (extra) first[n] = b_.repeat(*extra, 1, -1, p_.comma);
        for (size_t i = n; i-- > 0;) {
            const Rule with_comma = b_.sequence({p_.comma, members[i].rule});
            tail[i] =
                b_.sequence({members[i].required ? with_comma : b_.choice({b_.literal(""), with_comma}), tail[i + 1]});
            const Rule starts_here = b_.sequence({members[i].rule, tail[i + 1]});
            first[i] = members[i].required || !first[i + 1] ? starts_here : b_.choice({starts_here, *first[i + 1]});
        }
        return p_.bracketed("{", "}", first[0], required.empty());
    }

    GrammarBuilder& b_;
    const json& root_;
    JsonParts p_;
    std::map<std::string, Rule> refs_;
};

}  // namespace

GrammarBuilder::Rule compile_json_schema(GrammarBuilder& builder, const nlohmann::ordered_json& schema) {
    return SchemaCompiler(builder, schema).compile(schema, "");
}

}  // namespace deskside::engine
