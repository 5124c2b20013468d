// ref: jinja2 3.1 runtime.py / sandbox.py / compiler.py for the runtime rules reproduced here.
#include "models/chat_template/interpreter.h"

#include <climits>
#include <cmath>

#include "models/chat_template/unicode.h"

namespace deskside::models::jinja {

namespace {

struct BreakSignal {};
// Bounds that keep a hostile template (it may come inside a downloaded GGUF) from exhausting
// the stack or memory; real templates stay far below them.
constexpr int kMaxMacroDepth = 200;
constexpr uint64_t kMaxRepeat = uint64_t{1} << 26;
struct ContinueSignal {};

// Undefined values remember why they are undefined; using them raises that message.
Value undefined_attr(const Value& obj, const std::string& name) {
    const std::string who = obj.is_none() ? "'None'" : "'" + obj.type_name() + " object'";
    return Value::undefined("UndefinedError: " + who + " has no attribute '" + name + "'");
}

Value undefined_element(const Value& obj, const Value& key) {
    const std::string who = obj.is_none() ? "'None'" : "'" + obj.type_name() + " object'";
    return Value::undefined("UndefinedError: " + who + " has no element " + to_repr(key));
}

// Python's index normalisation for a sequence of length n; false when out of range.
bool normalize_index(int64_t& i, size_t n) {
    if (i < 0) i += static_cast<int64_t>(n);
    return i >= 0 && i < static_cast<int64_t>(n);
}

int64_t to_index(const Value& v, const char* what) {
    if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return v.as_int();
    if (v.is_undefined()) fail_undefined(v);
    fail("TypeError", std::string(what) + " indices must be integers or None, not " + v.type_name());
}

// Python slice semantics (negative bounds, negative step) over n elements.
std::vector<size_t> slice_indices(size_t n, const Value* start, const Value* stop, const Value* step) {
    const int64_t len = static_cast<int64_t>(n);
    const int64_t st = (step && !step->is_none() && !step->is_undefined()) ? to_index(*step, "slice") : 1;
    if (st == 0) fail("ValueError", "slice step cannot be zero");
    auto bound = [&](const Value* v, int64_t def) {
        if (!v || v->is_none() || v->is_undefined()) return def;
        int64_t i = to_index(*v, "slice");
        if (i < 0) i += len;
        if (st > 0) return std::clamp<int64_t>(i, 0, len);
        return std::clamp<int64_t>(i, -1, len - 1);
    };
    const int64_t b = bound(start, st > 0 ? 0 : len - 1);
    const int64_t e = bound(stop, st > 0 ? len : -1);
    std::vector<size_t> out;
    for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(static_cast<size_t>(i));
    return out;
}

}  // namespace

void fail_undefined(const Value& v) {
    const std::string& hint = v.str();
    const size_t colon = hint.find(": ");
    if (hint.empty() || colon == std::string::npos) fail("UndefinedError", hint.empty() ? "value is undefined" : hint);
    throw TemplateError(TemplateError::Kind::kRuntime, hint, hint.substr(0, colon));
}

Interpreter::Interpreter(const TemplateBody& tmpl, const Value& context, std::tm now)
    : tmpl_(tmpl), root_(std::make_shared<Scope>()), now_(now) {
    add_globals(*root_);
    for (const auto& [k, v] : context.dict_ref().items) root_->vars[to_str(k)] = v;
}

Interpreter::~Interpreter() {
    for (const ScopePtr& s : macro_scopes_) s->vars.clear();
}

std::string Interpreter::render() {
    std::string out;
    try {
        exec(tmpl_.body, root_, out);
    } catch (const TemplateError& e) {
        if (e.kind() != TemplateError::Kind::kRuntime) throw;
        throw TemplateError(e.kind(), std::string(e.what()) + " (template line " + std::to_string(line_) + ")",
                            e.python_type());
    } catch (const BreakSignal&) {
        fail("TemplateSyntaxError", "'break' outside of a loop");
    } catch (const ContinueSignal&) {
        fail("TemplateSyntaxError", "'continue' outside of a loop");
    }
    return out;
}

void Interpreter::exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const StmtPtr& sp : body) {
        const Stmt& s = *sp;
        line_ = s.line;
        switch (s.kind) {
            case StmtKind::kText: out += s.text; break;
            case StmtKind::kOutput: out += to_str(eval(*s.expr, scope)); break;
            case StmtKind::kIf: {
                bool taken = false;
                for (const auto& [test, branch] : s.branches) {
                    if (eval(*test, scope).truthy()) {
                        exec(branch, scope, out);
                        taken = true;
                        break;
                    }
                }
                if (!taken) exec(s.else_body, scope, out);
                break;
            }
            case StmtKind::kFor: exec_for(s, scope, out); break;
            case StmtKind::kSet: assign(s.target, eval(*s.expr, scope), scope); break;
            case StmtKind::kSetBlock: {
                std::string text;
                exec(s.body, scope, text);
                assign(s.target, apply_filters(s.filters, Value::string(std::move(text)), scope), scope);
                break;
            }
            case StmtKind::kMacro: exec_macro(s, scope); break;
            case StmtKind::kFilterBlock: {
                std::string text;
                exec(s.body, scope, text);
                out += to_str(apply_filters(s.filters, Value::string(std::move(text)), scope));
                break;
            }
            case StmtKind::kBreak: throw BreakSignal{};
            case StmtKind::kContinue: throw ContinueSignal{};
        }
    }
}

void Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    const Value iterable = eval(*s.expr, scope);
    if (iterable.is_none()) fail("TypeError", "'NoneType' object is not iterable");
    List items = iterable.iterate();
    if (s.cond) {  // `for x in xs if cond`: the loop only sees the items that pass
        List kept;
        for (Value& item : items) {
            auto probe = std::make_shared<Scope>();
            probe->parent = scope;
            assign(s.target, item, probe);
            if (eval(*s.cond, probe).truthy()) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
        auto iter_scope = std::make_shared<Scope>();  // each iteration starts from the outer scope
        iter_scope->parent = scope;
        Dict loop;
        loop.set(Value::string("index"), Value::integer(i + 1));
        loop.set(Value::string("index0"), Value::integer(i));
        loop.set(Value::string("revindex"), Value::integer(n - i));
        loop.set(Value::string("revindex0"), Value::integer(n - i - 1));
        loop.set(Value::string("first"), Value::boolean(i == 0));
        loop.set(Value::string("last"), Value::boolean(i == n - 1));
        loop.set(Value::string("length"), Value::integer(n));
        loop.set(Value::string("depth"), Value::integer(1));
        loop.set(Value::string("depth0"), Value::integer(0));
        if (i > 0) loop.set(Value::string("previtem"), items[i - 1]);
        if (i + 1 < n) loop.set(Value::string("nextitem"), items[i + 1]);
        loop.set(Value::string("cycle"), Value::callable("cycle", [i](Interpreter&, CallArgs& a) {
                     if (a.args.empty()) fail("TypeError", "no items for cycling given");
                     return a.args[static_cast<size_t>(i) % a.args.size()];
                 }));
        iter_scope->vars["loop"] = Value::dict(std::move(loop));
        assign(s.target, items[i], iter_scope);
        try {
            exec(s.body, iter_scope, out);
        } catch (const BreakSignal&) {
            break;
        } catch (const ContinueSignal&) {
        }
    }
    if (n == 0 && !s.else_body.empty()) {
        auto else_scope = std::make_shared<Scope>();
        else_scope->parent = scope;
        exec(s.else_body, else_scope, out);
    }
}

void Interpreter::exec_macro(const Stmt& s, const ScopePtr& scope) {
    const Stmt* macro = &s;
    ScopePtr defined_in = scope;
    macro_scopes_.push_back(scope);
    scope->vars[s.text] = Value::callable(s.text, [macro, defined_in](Interpreter& in, CallArgs& a) {
        auto local = std::make_shared<Scope>();
        local->parent = defined_in;
        const size_t n_params = macro->params.size();
        if (a.args.size() > n_params && !macro->uses_varargs)
            fail("TypeError", "macro '" + macro->text + "' takes not more than " + std::to_string(n_params) +
                                  " argument(s)");
        std::vector<bool> bound(n_params, false);
        for (size_t i = 0; i < n_params && i < a.args.size(); ++i) {
            local->vars[macro->params[i].name] = a.args[i];
            bound[i] = true;
        }
        Dict extra_kwargs;
        for (auto& [key, value] : a.kwargs) {
            size_t i = 0;
            while (i < n_params && macro->params[i].name != key) ++i;
            if (i < n_params) {
                local->vars[key] = value;
                bound[i] = true;
            } else if (macro->uses_kwargs) {
                extra_kwargs.set(Value::string(key), value);
            } else {
                fail("TypeError", "macro '" + macro->text + "' takes no keyword argument '" + key + "'");
            }
        }
        for (size_t i = 0; i < n_params; ++i) {
            if (bound[i]) continue;
            const MacroParam& p = macro->params[i];
            local->vars[p.name] = p.default_value
                                      ? in.eval(*p.default_value, local)
                                      : Value::undefined("UndefinedError: parameter '" + p.name + "' was not provided");
        }
        List rest;
        for (size_t i = n_params; i < a.args.size(); ++i) rest.push_back(a.args[i]);
        local->vars["varargs"] = Value::list(std::move(rest), Kind::kTuple);
        local->vars["kwargs"] = Value::dict(std::move(extra_kwargs));
        if (in.macro_depth_ >= kMaxMacroDepth) fail("RecursionError", "maximum macro recursion depth exceeded");
        std::string text;
        const int saved_line = in.line_;
        ++in.macro_depth_;
        try {
            in.exec(macro->body, local, text);
        } catch (...) {
            --in.macro_depth_;
            throw;
        }
        --in.macro_depth_;
        in.line_ = saved_line;
        return Value::string(std::move(text));
    });
}

void Interpreter::assign(const Target& target, Value value, const ScopePtr& scope) {
    if (!target.attr.empty()) {
        Value ns;
        for (Scope* s = scope.get(); s; s = s->parent.get()) {
            auto it = s->vars.find(target.names[0]);
            if (it != s->vars.end()) {
                ns = it->second;
                break;
            }
        }
        if (ns.kind() != Kind::kNamespace) fail("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        ns.dict_ref().set(Value::string(target.attr), std::move(value));
        return;
    }
    if (!target.unpack) {
        scope->vars[target.names[0]] = std::move(value);
        return;
    }
    if (value.is_undefined()) fail_undefined(value);
    List parts = value.iterate();
    if (parts.size() != target.names.size()) {
        fail("ValueError", (parts.size() < target.names.size() ? "not enough values to unpack (expected "
                                                                : "too many values to unpack (expected ") +
                               std::to_string(target.names.size()) + ", got " + std::to_string(parts.size()) + ")");
    }
    for (size_t i = 0; i < parts.size(); ++i) scope->vars[target.names[i]] = parts[i];
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value value, const ScopePtr& scope) {
    for (const ExprPtr& f : filters) value = call_filter(*f, std::move(value), scope);
    return value;
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
    CallArgs a;
    for (size_t i = first; i < e.children.size(); ++i) a.args.push_back(eval(*e.children[i], scope));
    for (const auto& [k, v] : e.kwargs) a.kwargs.emplace_back(k, eval(*v, scope));
    return a;
}

Value Interpreter::call_filter(const Expr& e, Value operand, const ScopePtr& scope) {
    const FilterFn fn = find_filter(e.name);
    if (!fn) fail("TemplateRuntimeError", "No filter named '" + e.name + "' found.");
    CallArgs a = eval_args(e, 1, scope);
    return fn(*this, operand, a);
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
    if (fn.is_undefined()) fail_undefined(fn);
    if (fn.kind() != Kind::kCallable) fail("TypeError", "'" + fn.type_name() + "' object is not callable");
    return fn.fn().fn(*this, args);
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
    switch (obj.kind()) {
        case Kind::kUndefined: fail_undefined(obj);
        case Kind::kDict: {
            Value method = find_method(obj, name);
            if (!method.is_undefined() || !method.str().empty()) return method;
            if (const Value* v = obj.dict_ref().find(Value::string(name))) return *v;
            return undefined_attr(obj, name);
        }
        case Kind::kNamespace: {
            if (const Value* v = obj.dict_ref().find(Value::string(name))) return *v;
            return undefined_attr(obj, name);
        }
        case Kind::kString:
        case Kind::kList:
        case Kind::kTuple: {
            Value method = find_method(obj, name);
            if (!method.is_undefined() || !method.str().empty()) return method;
            return undefined_attr(obj, name);
        }
        default: return undefined_attr(obj, name);
    }
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
    switch (obj.kind()) {
        case Kind::kUndefined: fail_undefined(obj);
        case Kind::kDict:
            if (const Value* v = obj.dict_ref().find(key)) return *v;
            if (key.is_string()) return getattr(obj, key.str());
            return undefined_element(obj, key);
        case Kind::kList:
        case Kind::kTuple: {
            if (key.kind() == Kind::kInt || key.kind() == Kind::kBool) {
                int64_t i = key.as_int();
                if (!normalize_index(i, obj.items().size())) return undefined_element(obj, key);
                return obj.items()[static_cast<size_t>(i)];
            }
            if (key.is_string()) return getattr(obj, key.str());
            return undefined_element(obj, key);
        }
        case Kind::kString: {
            if (key.kind() == Kind::kInt || key.kind() == Kind::kBool) {
                const std::u32string u = utf8_decode(obj.str());
                int64_t i = key.as_int();
                if (!normalize_index(i, u.size())) return undefined_element(obj, key);
                return Value::string(utf8_encode(u.substr(static_cast<size_t>(i), 1)));
            }
            if (key.is_string()) return getattr(obj, key.str());
            return undefined_element(obj, key);
        }
        case Kind::kNamespace:
            if (key.is_string()) return getattr(obj, key.str());
            return undefined_element(obj, key);
        default: return key.is_string() ? undefined_attr(obj, key.str()) : undefined_element(obj, key);
    }
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
        case ExprKind::kLiteral: return e.literal;
        case ExprKind::kName:
            for (Scope* s = scope.get(); s; s = s->parent.get()) {
                auto it = s->vars.find(e.name);
                if (it != s->vars.end()) return it->second;
            }
            return Value::undefined("UndefinedError: '" + e.name + "' is undefined");
        case ExprKind::kList:
        case ExprKind::kTuple: {
            List items;
            for (const ExprPtr& c : e.children) items.push_back(eval(*c, scope));
            return Value::list(std::move(items), e.kind == ExprKind::kList ? Kind::kList : Kind::kTuple);
        }
        case ExprKind::kDict: {
            Dict d;
            for (size_t i = 0; i + 1 < e.children.size(); i += 2) d.set(eval(*e.children[i], scope), eval(*e.children[i + 1], scope));
            return Value::dict(std::move(d));
        }
        case ExprKind::kAttr: return getattr(eval(*e.children[0], scope), e.name);
        case ExprKind::kItem: return getitem(eval(*e.children[0], scope), eval(*e.children[1], scope));
        case ExprKind::kSlice: {
            const Value obj = eval(*e.children[0], scope);
            Value parts[3];
            for (int k = 0; k < 3; ++k)
                if (e.children[1 + k]) parts[k] = eval(*e.children[1 + k], scope);
            auto part = [&](int k) { return e.children[1 + k] ? &parts[k] : nullptr; };
            if (obj.is_undefined()) fail_undefined(obj);
            if (obj.is_string()) {
                const std::u32string u = utf8_decode(obj.str());
                std::u32string r;
                for (size_t i : slice_indices(u.size(), part(0), part(1), part(2))) r.push_back(u[i]);
                return Value::string(utf8_encode(r));
            }
            if (obj.kind() != Kind::kList && obj.kind() != Kind::kTuple)
                fail("TypeError", "'" + obj.type_name() + "' object is not subscriptable");
            List r;
            for (size_t i : slice_indices(obj.items().size(), part(0), part(1), part(2))) r.push_back(obj.items()[i]);
            return Value::list(std::move(r), obj.kind());
        }
        case ExprKind::kCall: {
            const Value fn = eval(*e.children[0], scope);
            CallArgs a = eval_args(e, 1, scope);
            return call(fn, a);
        }
        case ExprKind::kFilter: return call_filter(e, eval(*e.children[0], scope), scope);
        case ExprKind::kTest: {
            const TestFn fn = find_test(e.name);
            if (!fn) fail("TemplateRuntimeError", "No test named '" + e.name + "' found.");
            const Value operand = eval(*e.children[0], scope);
            CallArgs a = eval_args(e, 1, scope);
            return Value::boolean(fn(*this, operand, a) != e.negated);
        }
        case ExprKind::kNot: return Value::boolean(!eval(*e.children[0], scope).truthy());
        case ExprKind::kNeg:
        case ExprKind::kPos: {
            const Value v = eval(*e.children[0], scope);
            if (v.is_undefined()) fail_undefined(v);
            if (!v.is_number()) fail("TypeError", std::string("bad operand type for unary ") + (e.kind == ExprKind::kNeg ? "-" : "+") + ": '" + v.type_name() + "'");
            if (e.kind == ExprKind::kPos) return v.kind() == Kind::kBool ? Value::integer(v.as_int()) : v;
            return v.kind() == Kind::kFloat ? Value::number(-v.as_float()) : Value::integer(-v.as_int());
        }
        case ExprKind::kBinary: {
            const Value l = eval(*e.children[0], scope);
            const Value r = eval(*e.children[1], scope);
            line_ = e.line;
            return binary(e.name, l, r);
        }
        case ExprKind::kAnd: {
            Value l = eval(*e.children[0], scope);
            return l.truthy() ? eval(*e.children[1], scope) : l;
        }
        case ExprKind::kOr: {
            Value l = eval(*e.children[0], scope);
            return l.truthy() ? l : eval(*e.children[1], scope);
        }
        case ExprKind::kCompare: {
            Value l = eval(*e.children[0], scope);
            for (size_t i = 0; i < e.ops.size(); ++i) {
                Value r = eval(*e.children[i + 1], scope);
                if (!compare(e.ops[i], l, r)) return Value::boolean(false);
                l = std::move(r);
            }
            return Value::boolean(true);
        }
        case ExprKind::kCondExpr:
            if (eval(*e.children[0], scope).truthy()) return eval(*e.children[1], scope);
            if (e.children[2]) return eval(*e.children[2], scope);
            return Value::undefined("UndefinedError: the inline if-expression on line " + std::to_string(e.line) +
                                    " evaluated to false and no else section was defined.");
    }
    return Value();
}

bool Interpreter::compare(const std::string& op, const Value& l, const Value& r) {
    if (op == "==") return equals(l, r);
    if (op == "!=") return !equals(l, r);
    if (op == "in") return contains(r, l);
    if (op == "not in") return !contains(r, l);
    if (l.is_undefined()) fail_undefined(l);
    if (r.is_undefined()) fail_undefined(r);
    try {
        if (op == "<") return less(l, r);
        if (op == ">") return less(r, l);
        if (op == "<=") return !less(r, l);
        return !less(l, r);  // >=
    } catch (const TemplateError&) {
        fail("TypeError", "'" + op + "' not supported between instances of '" + l.type_name() + "' and '" + r.type_name() + "'");
    }
}

Value Interpreter::binary(const std::string& op, const Value& l, const Value& r) {
    if (op == "~") return Value::string(to_str(l) + to_str(r));
    if (l.is_undefined()) fail_undefined(l);
    if (r.is_undefined()) fail_undefined(r);
    auto unsupported = [&]() -> Value {
        fail("TypeError", "unsupported operand type(s) for " + op + ": '" + l.type_name() + "' and '" + r.type_name() + "'");
    };
    const bool floats = l.kind() == Kind::kFloat || r.kind() == Kind::kFloat;
    if (l.is_number() && r.is_number()) {
        const double a = l.as_float(), b = r.as_float();
        const int64_t x = l.as_int(), y = r.as_int();
        // Python integers are unbounded; ours are 64-bit, so say so instead of wrapping around.
        auto checked = [](bool overflow, const int64_t& result) {
            if (overflow) fail("OverflowError", "integer result does not fit in 64 bits");
            return Value::integer(result);
        };
        int64_t r = 0;  // read through a reference, after the builtin has written it
        if (op == "+") return floats ? Value::number(a + b) : checked(__builtin_add_overflow(x, y, &r), r);
        if (op == "-") return floats ? Value::number(a - b) : checked(__builtin_sub_overflow(x, y, &r), r);
        if (op == "*") return floats ? Value::number(a * b) : checked(__builtin_mul_overflow(x, y, &r), r);
        if (op == "/") {
            if (b == 0) fail("ZeroDivisionError", "division by zero");
            return Value::number(a / b);
        }
        if (op == "//" || op == "%") {
            if (b == 0) fail("ZeroDivisionError", op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
            if (floats) {
                const double q = std::floor(a / b);
                return op == "//" ? Value::number(q) : Value::number(a - q * b);
            }
            if (x == INT64_MIN && y == -1) fail("OverflowError", "integer result does not fit in 64 bits");
            int64_t q = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) --q;  // Python floors
            return op == "//" ? Value::integer(q) : Value::integer(x - q * y);
        }
        if (op == "**") {
            if (!floats && y >= 0) {
                int64_t p = 1;
                for (int64_t k = 0; k < y && p != 0; ++k)
                    if (__builtin_mul_overflow(p, x, &p)) fail("OverflowError", "integer result does not fit in 64 bits");
                return Value::integer(p);
            }
            return Value::number(std::pow(a, b));
        }
        return unsupported();
    }
    if (op == "+") {
        if (l.is_string() && r.is_string()) {
            // Markup + str escapes the str (markupsafe); plain str + str concatenates.
            if (l.is_markup() || r.is_markup()) {
                const std::string a = l.is_markup() ? l.str() : html_escape(l.str());
                const std::string b = r.is_markup() ? r.str() : html_escape(r.str());
                return Value::string(a + b, true);
            }
            return Value::string(l.str() + r.str());
        }
        if ((l.kind() == Kind::kList || l.kind() == Kind::kTuple) && l.kind() == r.kind()) {
            List items = l.items();
            items.insert(items.end(), r.items().begin(), r.items().end());
            return Value::list(std::move(items), l.kind());
        }
        if (l.is_string() || l.kind() == Kind::kList || l.kind() == Kind::kTuple)
            fail("TypeError", "can only concatenate " + std::string(l.is_string() ? "str" : l.type_name()) + " (not \"" +
                                  r.type_name() + "\") to " + (l.is_string() ? "str" : l.type_name()));
        return unsupported();
    }
    if (op == "*") {
        const Value& seq = r.kind() == Kind::kInt || r.kind() == Kind::kBool ? l : r;
        const Value& count = &seq == &l ? r : l;
        if ((count.kind() == Kind::kInt || count.kind() == Kind::kBool) &&
            (seq.is_string() || seq.kind() == Kind::kList || seq.kind() == Kind::kTuple)) {
            const int64_t n = std::max<int64_t>(0, count.as_int());
            const size_t unit = seq.is_string() ? seq.str().size() : seq.items().size();
            if (unit > 0 && static_cast<uint64_t>(n) > kMaxRepeat / unit)
                fail("MemoryError", "repetition result would exceed " + std::to_string(kMaxRepeat) + " elements");
            if (seq.is_string()) {
                std::string s;
                for (int64_t k = 0; k < n; ++k) s += seq.str();
                return Value::string(std::move(s), seq.is_markup());
            }
            List items;
            for (int64_t k = 0; k < n; ++k) items.insert(items.end(), seq.items().begin(), seq.items().end());
            return Value::list(std::move(items), seq.kind());
        }
        return unsupported();
    }
    if (op == "%" && l.is_string()) return percent_format(l, r);
    return unsupported();
}

}  // namespace deskside::models::jinja
