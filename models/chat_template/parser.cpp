// ref: jinja2 3.1 parser.py for the grammar and operator precedence reproduced here:
// condexpr > or > and > not > compare > + - > ~ > * / // % > ** > unary > postfix/filters.
#include "models/chat_template/parser.h"

#include <algorithm>
#include <initializer_list>

#include "models/chat_template/chat_template.h"
#include "models/chat_template/lexer.h"

namespace deskside::models::jinja {

namespace {

class Parser {
   public:
    explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

    std::shared_ptr<const TemplateBody> run() {
        auto out = std::make_shared<TemplateBody>();
        out->body = subparse({});
        return out;
    }

   private:
    std::vector<Token> t_;
    size_t i_ = 0;
    int soft_ = 0;  // inside an if test/body or a conditional expression: unknown filters fail late
    int depth_ = 0;  // expression and block nesting, bounded so hostile input cannot overflow the stack
    static constexpr int kMaxDepth = 256;

    struct DepthGuard {
        Parser& p;
        DepthGuard(Parser& parser, const Token& at) : p(parser) {
            if (++p.depth_ > kMaxDepth) p.error(at, "template nesting is deeper than " + std::to_string(kMaxDepth));
        }
        ~DepthGuard() { --p.depth_; }
    };
    std::vector<std::set<std::string>*> name_sinks_;  // names referenced inside macros being parsed

    const Token& cur() const { return t_[i_]; }
    const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
    void next() {
        if (i_ + 1 < t_.size()) ++i_;
    }

    [[noreturn]] void error(const Token& at, const std::string& what) const {
        throw TemplateError(TemplateError::Kind::kSyntax,
                            "line " + std::to_string(at.line) + ", column " + std::to_string(at.column) + ": " + what,
                            "TemplateSyntaxError");
    }

    static std::string describe(const Token& t) {
        switch (t.type) {
            case TokenType::kData: return "template data";
            case TokenType::kVarBegin: return "'{{'";
            case TokenType::kVarEnd: return "end of print statement";
            case TokenType::kBlockBegin: return "'{%'";
            case TokenType::kBlockEnd: return "end of statement block";
            case TokenType::kEof: return "end of template";
            case TokenType::kString: return "string";
            default: return "'" + t.value + "'";
        }
    }

    bool is_op(const char* op) const { return cur().type == TokenType::kOp && cur().value == op; }
    bool is_name(const char* name) const { return cur().type == TokenType::kName && cur().value == name; }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(const char* name) {
        if (!is_name(name)) return false;
        next();
        return true;
    }
    void expect_op(const char* op) {
        if (!skip_op(op)) error(cur(), std::string("expected token '") + op + "', got " + describe(cur()));
    }
    std::string expect_name() {
        if (cur().type != TokenType::kName) error(cur(), "expected name, got " + describe(cur()));
        std::string v = cur().value;
        next();
        return v;
    }
    void expect(TokenType type) {
        if (cur().type != type) {
            const char* want = type == TokenType::kBlockEnd ? "end of statement block" : "end of print statement";
            error(cur(), std::string("expected ") + want + ", got " + describe(cur()));
        }
        next();
    }

    ExprPtr make(ExprKind kind, const Token& at) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->line = at.line;
        return e;
    }

    // ---- statements ------------------------------------------------------------------------

    Body subparse(std::initializer_list<const char*> end_tags) {
        Body body;
        while (true) {
            const Token& tok = cur();
            if (tok.type == TokenType::kEof) {
                if (end_tags.size() == 0) return body;
                std::string want;
                for (const char* tag : end_tags) want += (want.empty() ? "'" : " or '") + std::string(tag) + "'";
                error(tok, "Unexpected end of template. Jinja was looking for the following tags: " + want + ".");
            }
            if (tok.type == TokenType::kData) {
                auto s = std::make_unique<Stmt>();
                s->kind = StmtKind::kText;
                s->line = tok.line;
                s->text = tok.value;
                body.push_back(std::move(s));
                next();
            } else if (tok.type == TokenType::kVarBegin) {
                next();
                auto s = std::make_unique<Stmt>();
                s->kind = StmtKind::kOutput;
                s->line = tok.line;
                s->expr = parse_tuple(true, {});
                expect(TokenType::kVarEnd);
                body.push_back(std::move(s));
            } else if (tok.type == TokenType::kBlockBegin) {
                const Token& name = peek();
                if (name.type == TokenType::kName &&
                    std::any_of(end_tags.begin(), end_tags.end(), [&](const char* t) { return name.value == t; })) {
                    next();  // leave the end tag's name for the caller
                    return body;
                }
                next();
                body.push_back(parse_statement());
            } else {
                error(tok, "unexpected " + describe(tok));
            }
        }
    }

    // After a statement's end tag name: consume the name and the closing %}.
    void end_tag(const char* name) {
        if (!skip_name(name)) error(cur(), std::string("expected '") + name + "'");
        expect(TokenType::kBlockEnd);
    }

    StmtPtr parse_statement() {
        const Token& tok = cur();
        DepthGuard guard(*this, tok);
        if (tok.type != TokenType::kName) error(tok, "tag name expected");
        auto s = std::make_unique<Stmt>();
        s->line = tok.line;
        const std::string tag = tok.value;
        next();
        if (tag == "if") {
            s->kind = StmtKind::kIf;
            ++soft_;
            while (true) {
                ExprPtr test = parse_tuple(false, {});
                expect(TokenType::kBlockEnd);
                Body body = subparse({"elif", "else", "endif"});
                s->branches.emplace_back(std::move(test), std::move(body));
                if (skip_name("elif")) continue;
                if (skip_name("else")) {
                    expect(TokenType::kBlockEnd);
                    s->else_body = subparse({"endif"});
                }
                break;
            }
            --soft_;
            end_tag("endif");
        } else if (tag == "for") {
            s->kind = StmtKind::kFor;
            const int saved = soft_;
            soft_ = 0;
            s->target = parse_target(false);
            if (!skip_name("in")) error(cur(), "expected 'in', got " + describe(cur()));
            s->expr = parse_tuple(false, {"recursive"});
            if (skip_name("if")) s->cond = parse_expression(true);
            if (is_name("recursive")) error(cur(), "recursive loops are not supported");
            expect(TokenType::kBlockEnd);
            s->body = subparse({"endfor", "else"});
            if (skip_name("else")) {
                expect(TokenType::kBlockEnd);
                s->else_body = subparse({"endfor"});
            }
            end_tag("endfor");
            soft_ = saved;
        } else if (tag == "set") {
            s->target = parse_target(true);
            if (skip_op("=")) {
                s->kind = StmtKind::kSet;
                s->expr = parse_tuple(true, {});
                expect(TokenType::kBlockEnd);
            } else {
                s->kind = StmtKind::kSetBlock;
                if (s->target.unpack || !s->target.attr.empty()) error(cur(), "expected token '='");
                while (is_op("|")) s->filters.push_back(parse_filter(nullptr, false));
                expect(TokenType::kBlockEnd);
                s->body = subparse({"endset"});
                end_tag("endset");
            }
        } else if (tag == "macro") {
            s->kind = StmtKind::kMacro;
            s->text = expect_name();
            expect_op("(");
            while (!is_op(")")) {
                if (!s->params.empty()) expect_op(",");
                if (is_op(")")) break;
                MacroParam p;
                p.name = expect_name();
                if (skip_op("=")) p.default_value = parse_expression(true);
                s->params.push_back(std::move(p));
            }
            expect_op(")");
            expect(TokenType::kBlockEnd);
            std::set<std::string> used;
            name_sinks_.push_back(&used);
            const int saved = soft_;
            soft_ = 0;
            s->body = subparse({"endmacro"});
            soft_ = saved;
            name_sinks_.pop_back();
            s->uses_varargs = used.count("varargs") > 0;
            s->uses_kwargs = used.count("kwargs") > 0;
            end_tag("endmacro");
        } else if (tag == "filter") {
            s->kind = StmtKind::kFilterBlock;
            s->filters.push_back(parse_filter(nullptr, true));
            while (is_op("|")) s->filters.push_back(parse_filter(nullptr, false));
            expect(TokenType::kBlockEnd);
            s->body = subparse({"endfilter"});
            end_tag("endfilter");
        } else if (tag == "generation") {
            // transformers' AssistantTracker marks assistant spans; the text is the body's.
            s->kind = StmtKind::kFilterBlock;
            expect(TokenType::kBlockEnd);
            s->body = subparse({"endgeneration"});
            end_tag("endgeneration");
        } else if (tag == "break" || tag == "continue") {
            s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
            expect(TokenType::kBlockEnd);
        } else {
            error(tok, "Encountered unknown tag '" + tag + "'.");
        }
        return s;
    }

    // for-targets: names, optionally a tuple; set-targets may also be `ns.attr`.
    Target parse_target(bool with_namespace) {
        Target target;
        const bool paren = skip_op("(");
        target.names.push_back(expect_name());
        if (with_namespace && !paren && skip_op(".")) {
            target.attr = expect_name();
            return target;
        }
        while (skip_op(",")) {
            target.unpack = true;
            if (cur().type != TokenType::kName) break;
            target.names.push_back(expect_name());
        }
        if (paren) {
            expect_op(")");
            target.unpack = true;
        }
        return target;
    }

    // ---- expressions -----------------------------------------------------------------------

    bool tuple_end(std::initializer_list<const char*> extra) const {
        const Token& t = cur();
        if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || (t.type == TokenType::kOp && t.value == ")"))
            return true;
        return t.type == TokenType::kName &&
               std::any_of(extra.begin(), extra.end(), [&](const char* n) { return t.value == n; });
    }

    ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra, bool explicit_parens = false) {
        const Token start = cur();
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) expect_op(",");
            if (tuple_end(extra)) break;
            items.push_back(parse_expression(with_condexpr));
            if (is_op(",")) {
                is_tuple = true;
            } else {
                break;
            }
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicit_parens) error(cur(), "Expected an expression, got " + describe(cur()));
        }
        auto e = make(ExprKind::kTuple, start);
        e->children = std::move(items);
        return e;
    }

    ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

    ExprPtr parse_condexpr() {
        DepthGuard guard(*this, cur());
        ExprPtr expr = parse_or();
        while (is_name("if")) {
            const Token at = cur();
            next();
            ++soft_;
            ExprPtr test = parse_or();
            ExprPtr other = skip_name("else") ? parse_condexpr() : nullptr;
            --soft_;
            auto e = make(ExprKind::kCondExpr, at);
            e->children.push_back(std::move(test));
            e->children.push_back(std::move(expr));
            e->children.push_back(std::move(other));
            expr = std::move(e);
        }
        return expr;
    }

    ExprPtr binary(ExprKind kind, const Token& at, ExprPtr l, ExprPtr r, std::string op = {}) {
        auto e = make(kind, at);
        e->name = std::move(op);
        e->children.push_back(std::move(l));
        e->children.push_back(std::move(r));
        return e;
    }

    ExprPtr parse_or() {
        ExprPtr l = parse_and();
        while (is_name("or")) {
            const Token at = cur();
            next();
            l = binary(ExprKind::kOr, at, std::move(l), parse_and());
        }
        return l;
    }

    ExprPtr parse_and() {
        ExprPtr l = parse_not();
        while (is_name("and")) {
            const Token at = cur();
            next();
            l = binary(ExprKind::kAnd, at, std::move(l), parse_not());
        }
        return l;
    }

    ExprPtr parse_not() {
        DepthGuard guard(*this, cur());
        if (is_name("not")) {
            const Token at = cur();
            next();
            auto e = make(ExprKind::kNot, at);
            e->children.push_back(parse_not());
            return e;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const Token at = cur();
        ExprPtr first = parse_math1();
        auto e = make(ExprKind::kCompare, at);
        e->children.push_back(std::move(first));
        while (true) {
            if (cur().type == TokenType::kOp &&
                (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" ||
                 cur().value == ">" || cur().value == ">=")) {
                e->ops.push_back(cur().value);
                next();
            } else if (is_name("in")) {
                e->ops.push_back("in");
                next();
            } else if (is_name("not") && peek().type == TokenType::kName && peek().value == "in") {
                e->ops.push_back("not in");
                next();
                next();
            } else {
                break;
            }
            e->children.push_back(parse_math1());
        }
        if (e->ops.empty()) return std::move(e->children[0]);
        return e;
    }

    ExprPtr parse_math1() {
        ExprPtr l = parse_concat();
        while (is_op("+") || is_op("-")) {
            const Token at = cur();
            next();
            l = binary(ExprKind::kBinary, at, std::move(l), parse_concat(), at.value);
        }
        return l;
    }

    ExprPtr parse_concat() {
        ExprPtr l = parse_math2();
        while (is_op("~")) {
            const Token at = cur();
            next();
            l = binary(ExprKind::kBinary, at, std::move(l), parse_math2(), "~");
        }
        return l;
    }

    ExprPtr parse_math2() {
        ExprPtr l = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const Token at = cur();
            next();
            l = binary(ExprKind::kBinary, at, std::move(l), parse_pow(), at.value);
        }
        return l;
    }

    ExprPtr parse_pow() {
        ExprPtr l = parse_unary(true);
        while (is_op("**")) {
            const Token at = cur();
            next();
            l = binary(ExprKind::kBinary, at, std::move(l), parse_unary(true), "**");
        }
        return l;
    }

    ExprPtr parse_unary(bool with_filter) {
        const Token at = cur();
        DepthGuard guard(*this, at);
        ExprPtr node;
        if (skip_op("-")) {
            node = make(ExprKind::kNeg, at);
            node->children.push_back(parse_unary(false));
        } else if (skip_op("+")) {
            node = make(ExprKind::kPos, at);
            node->children.push_back(parse_unary(false));
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filter_expr(std::move(node));
        return node;
    }

    ExprPtr parse_primary() {
        const Token at = cur();
        ExprPtr e;
        switch (at.type) {
            case TokenType::kName: {
                next();
                if (at.value == "true" || at.value == "True" || at.value == "false" || at.value == "False") {
                    e = make(ExprKind::kLiteral, at);
                    e->literal = Value::boolean(at.value[0] == 't' || at.value[0] == 'T');
                } else if (at.value == "none" || at.value == "None") {
                    e = make(ExprKind::kLiteral, at);
                    e->literal = Value::none();
                } else {
                    e = make(ExprKind::kName, at);
                    e->name = at.value;
                    for (auto* sink : name_sinks_) sink->insert(at.value);
                }
                return e;
            }
            case TokenType::kString: {
                std::string s;
                while (cur().type == TokenType::kString) {  // adjacent literals concatenate
                    s += cur().value;
                    next();
                }
                e = make(ExprKind::kLiteral, at);
                e->literal = Value::string(std::move(s));
                return e;
            }
            case TokenType::kInt:
                next();
                e = make(ExprKind::kLiteral, at);
                try {
                    e->literal = Value::integer(std::stoll(at.value));
                } catch (const std::exception&) {
                    error(at, "integer literal out of range: " + at.value);
                }
                return e;
            case TokenType::kFloat:
                next();
                e = make(ExprKind::kLiteral, at);
                e->literal = Value::number(std::stod(at.value));
                return e;
            default: break;
        }
        if (skip_op("(")) {
            e = parse_tuple(true, {}, true);
            expect_op(")");
            return e;
        }
        if (skip_op("[")) {
            e = make(ExprKind::kList, at);
            while (!is_op("]")) {
                if (!e->children.empty()) expect_op(",");
                if (is_op("]")) break;
                e->children.push_back(parse_expression(true));
            }
            expect_op("]");
            return e;
        }
        if (skip_op("{")) {
            e = make(ExprKind::kDict, at);
            while (!is_op("}")) {
                if (!e->children.empty()) expect_op(",");
                if (is_op("}")) break;
                e->children.push_back(parse_expression(true));
                expect_op(":");
                e->children.push_back(parse_expression(true));
            }
            expect_op("}");
            return e;
        }
        error(at, "unexpected " + describe(at));
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            const Token at = cur();
            if (skip_op(".")) {
                if (cur().type == TokenType::kName) {
                    auto e = make(ExprKind::kAttr, at);
                    e->name = cur().value;
                    next();
                    e->children.push_back(std::move(node));
                    node = std::move(e);
                } else if (cur().type == TokenType::kInt) {
                    auto e = make(ExprKind::kItem, at);
                    auto idx = make(ExprKind::kLiteral, cur());
                    idx->literal = Value::integer(std::stoll(cur().value));
                    next();
                    e->children.push_back(std::move(node));
                    e->children.push_back(std::move(idx));
                    node = std::move(e);
                } else {
                    error(cur(), "expected name or number");
                }
            } else if (skip_op("[")) {
                node = parse_subscript(std::move(node), at);
            } else if (is_op("(")) {
                node = parse_call(std::move(node));
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr node, const Token& at) {
        std::vector<ExprPtr> parts;
        bool slice = false;
        if (!is_op(":")) parts.push_back(parse_expression(true));
        else parts.push_back(nullptr);
        if (skip_op(":")) {
            slice = true;
            parts.push_back(is_op("]") || is_op(":") ? nullptr : parse_expression(true));
            if (skip_op(":")) parts.push_back(is_op("]") ? nullptr : parse_expression(true));
            else parts.push_back(nullptr);
        }
        if (is_op(",")) error(cur(), "tuple subscripts are not supported");
        expect_op("]");
        auto e = make(slice ? ExprKind::kSlice : ExprKind::kItem, at);
        e->children.push_back(std::move(node));
        for (auto& p : parts) e->children.push_back(std::move(p));
        return e;
    }

    // Arguments of a call, filter or test; `into` gets the positional ones after index 0.
    void parse_call_args(Expr& into) {
        expect_op("(");
        bool first = true;
        while (!is_op(")")) {
            if (!first) expect_op(",");
            first = false;
            if (is_op(")")) break;
            if (is_op("*") || is_op("**")) error(cur(), "*args and **kwargs in calls are not supported");
            if (cur().type == TokenType::kName && peek().type == TokenType::kOp && peek().value == "=") {
                std::string key = cur().value;
                next();
                next();
                into.kwargs.emplace_back(std::move(key), parse_expression(true));
            } else {
                if (!into.kwargs.empty()) error(cur(), "invalid syntax for function call expression");
                into.children.push_back(parse_expression(true));
            }
        }
        expect_op(")");
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto e = make(ExprKind::kCall, cur());
        e->children.push_back(std::move(callee));
        parse_call_args(*e);
        return e;
    }

    std::string dotted_name() {
        std::string name = expect_name();
        while (is_op(".") && peek().type == TokenType::kName) {
            next();
            name += "." + expect_name();
        }
        return name;
    }

    ExprPtr parse_filter(ExprPtr node, bool start_inline) {
        if (!start_inline) expect_op("|");
        const Token at = cur();
        auto e = make(ExprKind::kFilter, at);
        e->name = dotted_name();
        if (!has_filter(e->name) && soft_ == 0) error(at, "No filter named '" + e->name + "'.");
        e->children.push_back(std::move(node));
        if (is_op("(")) parse_call_args(*e);
        return e;
    }

    ExprPtr parse_filter_expr(ExprPtr node) {
        while (true) {
            if (is_op("|")) {
                node = parse_filter(std::move(node), false);
            } else if (is_name("is")) {
                node = parse_test(std::move(node));
            } else if (is_op("(")) {
                node = parse_call(std::move(node));
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_test(ExprPtr node) {
        next();  // 'is'
        const bool negated = skip_name("not");
        const Token at = cur();
        auto e = make(ExprKind::kTest, at);
        e->name = dotted_name();
        e->negated = negated;
        if (!has_test(e->name) && soft_ == 0) error(at, "No test named '" + e->name + "'.");
        e->children.push_back(std::move(node));
        const TokenType tt = cur().type;
        if (is_op("(")) {
            parse_call_args(*e);
        } else if ((tt == TokenType::kName || tt == TokenType::kString || tt == TokenType::kInt ||
                    tt == TokenType::kFloat || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) error(cur(), "You cannot chain multiple tests with is");
            e->children.push_back(parse_postfix(parse_primary()));
        }
        return e;
    }
};

}  // namespace

std::shared_ptr<const TemplateBody> parse_template(const std::string& source) {
    return Parser(tokenize(source)).run();
}

}  // namespace deskside::models::jinja
