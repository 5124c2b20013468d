// Evaluates a parsed template with jinja2's runtime semantics: scopes (a for-loop iteration
// and a macro call get their own, if-blocks do not), Undefined that renders empty but fails on
// attribute access or arithmetic, the sandbox's refusal to mutate lists and dicts, loop
// variables, macros and namespaces.
#pragma once

#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/chat_template/ast.h"

namespace deskside::models::jinja {

struct Scope {
    std::map<std::string, Value> vars;
    std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
   public:
    // `context` is a dict of template variables; `now` is what strftime_now formats.
    Interpreter(const TemplateBody& tmpl, const Value& context, std::tm now);
    ~Interpreter();
    Interpreter(const Interpreter&) = delete;
    Interpreter& operator=(const Interpreter&) = delete;
    std::string render();

    Value eval(const Expr& e, const ScopePtr& scope);
    Value call(const Value& fn, CallArgs& args);
    // Python/jinja2 attribute and item lookup (environment.getattr / getitem in the sandbox).
    Value getattr(const Value& obj, const std::string& name);
    Value getitem(const Value& obj, const Value& key);
    const std::tm& now() const { return now_; }

   private:
    const TemplateBody& tmpl_;
    ScopePtr root_;
    std::tm now_;
    int line_ = 0;  // of the statement or expression being evaluated, for error messages
    int macro_depth_ = 0;
    // A macro holds the scope it was defined in, and that scope holds the macro: the cycle is
    // broken when rendering ends by clearing these scopes.
    std::vector<ScopePtr> macro_scopes_;

    void exec(const Body& body, const ScopePtr& scope, std::string& out);
    void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
    void exec_macro(const Stmt& s, const ScopePtr& scope);
    void assign(const Target& target, Value value, const ScopePtr& scope);
    Value apply_filters(const std::vector<ExprPtr>& filters, Value value, const ScopePtr& scope);
    Value call_filter(const Expr& e, Value operand, const ScopePtr& scope);
    CallArgs eval_args(const Expr& e, size_t first, const ScopePtr& scope);
    Value binary(const std::string& op, const Value& l, const Value& r);
    bool compare(const std::string& op, const Value& l, const Value& r);
};

// Lookup tables implemented in builtins.cpp / methods.cpp.
using FilterFn = Value (*)(Interpreter&, Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);
// A bound method of a str, list or dict (e.g. "abc".startswith), or Undefined whose use fails
// with the sandbox's SecurityError for mutating methods, or a plain Undefined if none.
Value find_method(const Value& obj, const std::string& name);
// Python's `in` and `%` formatting, shared by operators, filters and tests.
bool contains(const Value& container, const Value& item);
Value percent_format(const Value& format, const Value& args);
// The globals every template sees (range, dict, namespace, raise_exception, strftime_now).
void add_globals(Scope& scope);
// Errors about an Undefined: raise its recorded hint as jinja2's UndefinedError.
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace deskside::models::jinja
