// The parsed form of a template: expression and statement trees mirroring jinja2's nodes.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "models/chat_template/value.h"

namespace deskside::models::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
    kLiteral,   // literal
    kName,      // name
    kList,      // children
    kTuple,     // children
    kDict,      // children: key, value, key, value, ...
    kAttr,      // children[0].name
    kItem,      // children[0][children[1]]
    kSlice,     // children[0][children[1]:children[2]:children[3]], parts may be null
    kCall,      // children[0](children[1..], kwargs)
    kFilter,    // children[0] | name(children[1..], kwargs); children[0] null inside filter blocks
    kTest,      // children[0] is [not] name(children[1..])
    kNot,       // not children[0]
    kNeg,       // -children[0]
    kPos,       // +children[0]
    kBinary,    // children[0] name children[1], name one of + - * / // % ** ~
    kAnd,       // children[0] and children[1]
    kOr,        // children[0] or children[1]
    kCompare,   // children[0] ops[0] children[1] ops[1] children[2] ... (chained, as in Python)
    kCondExpr,  // children[1] if children[0] else children[2] (children[2] may be null)
};

struct Expr {
    ExprKind kind;
    int line = 0;
    Value literal;
    std::string name;
    std::vector<ExprPtr> children;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    std::vector<std::string> ops;
    bool negated = false;
};

// What `for` and `set` assign to: one name, several names (unpacking) or `ns.attr`.
struct Target {
    std::vector<std::string> names;
    bool unpack = false;
    std::string attr;  // set: names[0].attr = ...
};

enum class StmtKind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kFilterBlock, kBreak, kContinue };

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // null: required-less (undefined when missing)
};

struct Stmt {
    StmtKind kind;
    int line = 0;
    std::string text;                                // kText; kMacro name
    ExprPtr expr;                                    // kOutput, kSet value, kFor iterable
    ExprPtr cond;                                    // kFor `if` filter
    std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (test, body) for if and each elif
    Body body;                                       // kFor, kSetBlock, kMacro, kFilterBlock
    Body else_body;                                  // kIf, kFor
    Target target;                                   // kFor, kSet, kSetBlock
    std::vector<ExprPtr> filters;                    // kSetBlock, kFilterBlock: kFilter chain on null
    std::vector<MacroParam> params;                  // kMacro
    bool uses_varargs = false, uses_kwargs = false;  // kMacro: body refers to varargs / kwargs
};

struct TemplateBody {
    Body body;
};

}  // namespace deskside::models::jinja
