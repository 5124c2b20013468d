// Values of the Jinja interpreter: JSON data plus what Python's jinja2 adds on top (Undefined,
// tuples, Markup strings, generators, callables, namespace objects). Every operation here
// reproduces Python semantics (truthiness, ==, <, str(), repr(), json.dumps) because chat
// templates are rendered byte-identically to jinja2 running on CPython.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/chat_template/chat_template.h"

namespace deskside::models::jinja {

class Value;
class Interpreter;
using List = std::vector<Value>;

// A Python dict: insertion-ordered, small, so a linear scan is fine.
struct Dict {
    std::vector<std::pair<Value, Value>> items;
    const Value* find(const Value& key) const;
    void set(const Value& key, Value value);
};

// Positional and keyword arguments of a call, already evaluated.
struct CallArgs {
    std::vector<Value> args;
    std::vector<std::pair<std::string, Value>> kwargs;
};

struct Callable {
    std::string name;  // for error messages and repr
    std::function<Value(Interpreter&, CallArgs&)> fn;
};

enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kGenerator,  // what jinja2's map/select/selectattr/unique/items filters return
    kNamespace,
    kCallable,
};

class Value {
   public:
    Value() = default;  // undefined
    static Value undefined(std::string hint) {
        Value v;
        v.str_ = std::move(hint);
        return v;
    }
    static Value none() { return Value(Kind::kNone); }
    static Value boolean(bool b) {
        Value v(Kind::kBool);
        v.int_ = b;
        return v;
    }
    static Value integer(int64_t i) {
        Value v(Kind::kInt);
        v.int_ = i;
        return v;
    }
    static Value number(double f) {
        Value v(Kind::kFloat);
        v.float_ = f;
        return v;
    }
    static Value string(std::string s, bool markup = false) {
        Value v(Kind::kString);
        v.str_ = std::move(s);
        v.markup_ = markup;
        return v;
    }
    static Value list(List items, Kind kind = Kind::kList) {
        Value v(kind);
        v.list_ = std::make_shared<List>(std::move(items));
        return v;
    }
    static Value dict(Dict d = {}, Kind kind = Kind::kDict) {
        Value v(kind);
        v.dict_ = std::make_shared<Dict>(std::move(d));
        return v;
    }
    static Value callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
        Value v(Kind::kCallable);
        v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
        return v;
    }
    static Value from_json(const nlohmann::ordered_json& j);
    static Value from_json(const nlohmann::json& j);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::kUndefined; }
    bool is_none() const { return kind_ == Kind::kNone; }
    bool is_string() const { return kind_ == Kind::kString; }
    bool is_markup() const { return kind_ == Kind::kString && markup_; }
    bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
    bool is_sequence_like() const {
        return kind_ == Kind::kList || kind_ == Kind::kTuple || kind_ == Kind::kGenerator;
    }
    bool is_mapping() const { return kind_ == Kind::kDict; }

    bool as_bool() const { return int_ != 0; }
    int64_t as_int() const { return int_; }  // also for kBool
    double as_float() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
    const std::string& str() const { return str_; }  // kString text, or kUndefined's hint
    List& items() const { return *list_; }            // kList/kTuple/kGenerator
    Dict& dict_ref() const { return *dict_; }          // kDict/kNamespace
    const Callable& fn() const { return *fn_; }

    // The elements a for-loop or list() would see (dict -> keys, string -> characters).
    // Throws for non-iterables with Python's message.
    List iterate() const;
    // Python's truthiness.
    bool truthy() const;
    // Python's type name as jinja2 prints it in errors ("str", "dict", "NoneType", ...).
    std::string type_name() const;

   private:
    explicit Value(Kind k) : kind_(k) {}
    Kind kind_ = Kind::kUndefined;
    bool markup_ = false;
    int64_t int_ = 0;
    double float_ = 0;
    std::string str_;
    std::shared_ptr<List> list_;
    std::shared_ptr<Dict> dict_;
    std::shared_ptr<Callable> fn_;
};

// Errors raised while evaluating carry Python's exception class name, as jinja2 reports them.
[[noreturn]] void fail(std::string type, std::string message);

// str(value) and repr(value) as CPython prints them.
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
std::string float_repr(double f);
// Python == and <; less() throws TypeError for unorderable types.
bool equals(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);
// json.dumps(v, ensure_ascii, indent, separators, sort_keys) with Python's formatting.
// indent: empty optional = None; a string indent is used as given.
struct JsonOptions {
    bool ensure_ascii = false;
    bool has_indent = false;
    std::string indent;
    bool has_separators = false;
    std::string item_separator;
    std::string key_separator;
    bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonOptions& opt);
// markupsafe.escape: & < > ' " as HTML entities.
std::string html_escape(const std::string& s);

}  // namespace deskside::models::jinja
