// GrammarBuilder, the compilation of its rules into a recursive transition network, and the parse
// states over that network (see grammar_internal.h for the representation).
#include "engine/grammar.h"

#include <algorithm>
#include <functional>

#include "engine/grammar_internal.h"

namespace deskside::engine {

SchemaError::SchemaError(std::string path_, std::string keyword_, const std::string& why)
    : std::runtime_error("json schema: " + why + " (keyword '" + keyword_ + "' at '" +
                         (path_.empty() ? std::string("(root)") : path_) + "')"),
      path(std::move(path_)),
      keyword(std::move(keyword_)) {}

// ---- builder -------------------------------------------------------------------------------------

GrammarBuilder::GrammarBuilder() = default;
GrammarBuilder::~GrammarBuilder() = default;

GrammarBuilder::Rule GrammarBuilder::add(Node node) {
    for (Rule r : node.children) {
        if (r < 0 || r >= static_cast<Rule>(nodes_.size())) throw std::invalid_argument("grammar: unknown rule");
    }
    nodes_.push_back(std::move(node));
    return static_cast<Rule>(nodes_.size() - 1);
}

GrammarBuilder::Rule GrammarBuilder::literal(std::string_view bytes) {
    Node n;
    n.bytes = bytes;
    return add(std::move(n));
}

GrammarBuilder::Rule GrammarBuilder::byte_set(const std::bitset<256>& bytes) {
    if (bytes.none()) throw std::invalid_argument("grammar: empty byte set");
    Node n;
    n.kind = Node::Kind::kSet;
    n.set = bytes;
    return add(std::move(n));
}

GrammarBuilder::Rule GrammarBuilder::byte_range(uint8_t lo, uint8_t hi) {
    std::bitset<256> s;
    for (int b = lo; b <= hi; ++b) s.set(b);
    return byte_set(s);
}

GrammarBuilder::Rule GrammarBuilder::sequence(std::vector<Rule> rules) {
    if (rules.size() == 1) return rules[0];
    Node n;
    n.kind = Node::Kind::kSequence;
    n.children = std::move(rules);
    return add(std::move(n));
}

GrammarBuilder::Rule GrammarBuilder::choice(std::vector<Rule> rules) {
    if (rules.empty()) throw std::invalid_argument("grammar: choice of nothing");
    if (rules.size() == 1) return rules[0];
    Node n;
    n.kind = Node::Kind::kChoice;
    n.children = std::move(rules);
    return add(std::move(n));
}

GrammarBuilder::Rule GrammarBuilder::repeat(Rule r, int64_t min, int64_t max, std::optional<Rule> separator) {
    if (min < 0 || (max >= 0 && max < min) || max < -1) throw std::invalid_argument("grammar: bad repeat bounds");
    Node n;
    n.kind = Node::Kind::kRepeat;
    n.children = {r};
    n.min = min;
    n.max = max;
    if (separator) {
        if (*separator < 0 || *separator >= static_cast<Rule>(nodes_.size())) {
            throw std::invalid_argument("grammar: unknown rule");
        }
        n.separator = *separator;
    }
    return add(std::move(n));
}

GrammarBuilder::Rule GrammarBuilder::forward() {
    Node n;
    n.kind = Node::Kind::kForward;
    return add(std::move(n));
}

void GrammarBuilder::define(Rule forward_rule, Rule body) {
    if (forward_rule < 0 || forward_rule >= static_cast<Rule>(nodes_.size()) ||
        nodes_[forward_rule].kind != Node::Kind::kForward || !nodes_[forward_rule].children.empty() || body < 0 ||
        body >= static_cast<Rule>(nodes_.size())) {
        throw std::invalid_argument("grammar: define needs an undefined forward rule and a known body");
    }
    nodes_[forward_rule].children = {body};
}

// ---- compilation ---------------------------------------------------------------------------------

namespace {

using Node = GrammarBuilder::Node;
using Rule = GrammarBuilder::Rule;

// Turns builder nodes into network states. A node becomes a rule of its own (entered by a call
// edge) when it is a forward rule, when several parents share it, or when a repeat runs it more
// than once; otherwise it is inlined, Thompson style, with fresh states so loops never merge.
class Compiler {
   public:
    Compiler(const std::vector<Node>& nodes, Rule root)
        : nodes_(nodes), refs_(nodes.size()), rule_of_(nodes.size(), -1) {
        count_refs(root);
        net_.root_rule = rule(root);
    }
    Network take() { return std::move(net_); }

   private:
    void count_refs(Rule root) {
        std::vector<uint8_t> seen(nodes_.size());
        std::vector<Rule> todo{root};
        seen[root] = 1;
        while (!todo.empty()) {
            const Rule r = todo.back();
            todo.pop_back();
            const Node& n = nodes_[r];
            if (n.kind == Node::Kind::kForward && n.children.empty()) {
                throw std::invalid_argument("grammar: forward rule " + std::to_string(r) + " never defined");
            }
            std::vector<Rule> kids = n.children;
            if (n.separator >= 0) kids.push_back(n.separator);
            for (Rule k : kids) {
                ++refs_[k];
                if (!seen[k]) {
                    seen[k] = 1;
                    todo.push_back(k);
                }
            }
        }
    }

    bool trivial(Rule r) const {
        const Node& n = nodes_[r];
        return n.kind == Node::Kind::kSet || (n.kind == Node::Kind::kBytes && n.bytes.size() <= 8);
    }

    int32_t new_state() {
        net_.states.emplace_back();
        return static_cast<int32_t>(net_.states.size() - 1);
    }

    int32_t rule(Rule r) {
        if (rule_of_[r] >= 0) return rule_of_[r];
        const int32_t id = static_cast<int32_t>(net_.rule_start.size());
        rule_of_[r] = id;
        const int32_t start = new_state();
        net_.rule_start.push_back(start);
        const int32_t end = inline_node(r, start);
        net_.states[end].final = true;
        return id;
    }

    int32_t call(Rule r, int32_t from) {
        const int32_t rid = rule(r);  // before new_state: rule() may add states
        const int32_t to = new_state();
        net_.states[from].calls.push_back({rid, to});
        return to;
    }

    int32_t emit(Rule r, int32_t from) {
        const Node& n = nodes_[r];
        if (n.kind == Node::Kind::kForward || (refs_[r] > 1 && !trivial(r))) return call(r, from);
        return inline_node(r, from);
    }

    // Items of a repeat that runs more than once are called rather than copied.
    int32_t emit_item(Rule r, int32_t from, bool many) { return many && !trivial(r) ? call(r, from) : emit(r, from); }

    void eps(int32_t from, int32_t to) { net_.states[from].eps.push_back(to); }

    int32_t inline_node(Rule r, int32_t from) {
        const Node& n = nodes_[r];
        switch (n.kind) {
            case Node::Kind::kBytes: {
                int32_t cur = from;
                for (unsigned char b : n.bytes) {
                    const int32_t next = new_state();
                    net_.states[cur].bytes.push_back({b, b, next});
                    cur = next;
                }
                return cur;
            }
            case Node::Kind::kSet: {
                const int32_t to = new_state();
                for (int b = 0; b < 256; ++b) {
                    if (!n.set[b]) continue;
                    int e = b;
                    while (e + 1 < 256 && n.set[e + 1]) ++e;
                    net_.states[from].bytes.push_back({static_cast<uint8_t>(b), static_cast<uint8_t>(e), to});
                    b = e;
                }
                return to;
            }
            case Node::Kind::kSequence: {
                int32_t cur = from;
                for (Rule c : n.children) cur = emit(c, cur);
                return cur;
            }
            case Node::Kind::kChoice: {
                const int32_t join = new_state();
                for (Rule c : n.children) {
                    const int32_t s = new_state();
                    eps(from, s);
                    eps(emit(c, s), join);
                }
                return join;
            }
            case Node::Kind::kRepeat: return inline_repeat(n, from);
            case Node::Kind::kForward: return emit(n.children[0], from);
        }
        return from;
    }

    int32_t inline_repeat(const Node& n, int32_t from) {
        const Rule item = n.children[0];
        const bool many = n.max != 0 && n.max != 1;
        int32_t cur = new_state();
        eps(from, cur);
        const auto one = [&](int32_t at, bool first) {
            if (!first && n.separator >= 0) at = emit_item(n.separator, at, many);
            return emit_item(item, at, many);
        };
        for (int64_t i = 0; i < n.min; ++i) cur = one(cur, i == 0);
        const int32_t join = new_state();
        if (n.max < 0) {
            const int32_t after_item = new_state();  // loop head: another separator + item, or stop
            eps(after_item, join);
            eps(one(after_item, false), after_item);
            if (n.min == 0 && n.separator >= 0) {
                eps(cur, join);
                eps(one(cur, true), after_item);
            } else {  // without a separator the first item is like any other: one loop, one parse state
                eps(cur, after_item);
            }
            return join;
        }
        for (int64_t i = n.min; i < n.max; ++i) {
            eps(cur, join);
            cur = one(cur, i == 0);
        }
        eps(cur, join);
        return join;
    }

    const std::vector<Node>& nodes_;
    std::vector<int32_t> refs_;
    std::vector<int32_t> rule_of_;
    Network net_;
};

// A rule that can call itself before reading a byte would make the parse stacks grow without end.
void check_left_recursion(const Network& net) {
    const size_t n_rules = net.rule_start.size();
    // Which rules can end without reading a byte: a fixpoint over the rules.
    std::vector<uint8_t> nullable(n_rules);
    const auto reach_from_start = [&](size_t rule, const std::function<void(int32_t)>& on_call) {
        std::vector<uint8_t> seen(net.states.size());
        std::vector<int32_t> todo{net.rule_start[rule]};
        bool ends = false;
        while (!todo.empty()) {
            const int32_t s = todo.back();
            todo.pop_back();
            if (seen[s]) continue;
            seen[s] = 1;
            const Network::State& st = net.states[s];
            if (st.final) ends = true;
            for (int32_t e : st.eps) todo.push_back(e);
            for (const Network::Call& c : st.calls) {
                on_call(c.rule);
                if (nullable[c.rule]) todo.push_back(c.ret);
            }
        }
        return ends;
    };
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < n_rules; ++r) {
            if (!nullable[r] && reach_from_start(r, [](int32_t) {})) nullable[r] = changed = true;
        }
    }
    std::vector<std::vector<int32_t>> left_calls(n_rules);
    for (size_t r = 0; r < n_rules; ++r) reach_from_start(r, [&](int32_t c) { left_calls[r].push_back(c); });
    std::vector<uint8_t> color(n_rules);  // 0 new, 1 on the path, 2 done
    const std::function<void(int32_t)> visit = [&](int32_t r) {
        color[r] = 1;
        for (int32_t c : left_calls[r]) {
            if (color[c] == 1) throw std::invalid_argument("grammar: left recursion (a rule reaches itself first)");
            if (color[c] == 0) visit(c);
        }
        color[r] = 2;
    };
    for (size_t r = 0; r < n_rules; ++r) {
        if (color[r] == 0) visit(static_cast<int32_t>(r));
    }
}

}  // namespace

std::shared_ptr<const Grammar> GrammarBuilder::build(Rule root) {
    if (root < 0 || root >= static_cast<Rule>(nodes_.size())) throw std::invalid_argument("grammar: unknown root rule");
    Network net = Compiler(nodes_, root).take();
    check_left_recursion(net);
    return std::make_shared<const Grammar>(std::make_unique<Grammar::Impl>(std::move(net)));
}

std::shared_ptr<const Grammar> json_schema_grammar(const nlohmann::ordered_json& schema) {
    GrammarBuilder b;
    return b.build(b.json_schema(schema));
}

std::shared_ptr<const Grammar> json_object_grammar() {
    GrammarBuilder b;
    return b.build(b.any_json_object());
}

// ---- parse states --------------------------------------------------------------------------------

Grammar::Grammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Grammar::~Grammar() = default;

size_t Grammar::n_states() const { return impl_->net.states.size(); }

bool Grammar::matches(std::string_view text) const {
    const int32_t c = impl_->step(impl_->initial(), text);
    return c != kDead && impl_->accepting(c);
}

bool Grammar::is_prefix(std::string_view text) const { return impl_->step(impl_->initial(), text) != kDead; }

Grammar::Impl::Impl(Network network) : net(std::move(network)) {
    std::vector<int32_t> tops;
    bool accept = false;
    std::vector<uint64_t> seen;
    closure(net.rule_start[net.root_rule], -1, tops, accept, seen);
    initial_ = intern(std::move(tops), accept);
}

int32_t Grammar::Impl::node(int32_t state, int32_t parent) {
    const uint64_t key = (static_cast<uint64_t>(state) << 32) | static_cast<uint32_t>(parent + 1);
    const auto [it, inserted] = node_ids_.try_emplace(key, static_cast<int32_t>(node_state_.size()));
    if (inserted) {
        node_state_.push_back(state);
        node_parent_.push_back(parent);
    }
    return it->second;
}

// Every stack that (state, parent) reaches without reading a byte: through epsilon edges, into
// called rules, and out of finished rules to the caller's continuation.
void Grammar::Impl::closure(int32_t state, int32_t parent, std::vector<int32_t>& tops, bool& accept,
                            std::vector<uint64_t>& seen) {
    const uint64_t key = (static_cast<uint64_t>(state) << 32) | static_cast<uint32_t>(parent + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
    seen.push_back(key);
    const Network::State& st = net.states[state];
    if (st.final) {
        if (parent < 0) {
            accept = true;
        } else {
            closure(node_state_[parent], node_parent_[parent], tops, accept, seen);
        }
    }
    for (int32_t e : st.eps) closure(e, parent, tops, accept, seen);
    for (const Network::Call& c : st.calls) closure(net.rule_start[c.rule], node(c.ret, parent), tops, accept, seen);
    if (!st.bytes.empty()) tops.push_back(node(state, parent));
}

int32_t Grammar::Impl::intern(std::vector<int32_t> tops, bool accept) {
    std::sort(tops.begin(), tops.end());
    tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
    if (tops.empty() && !accept) return kDead;
    std::string key(reinterpret_cast<const char*>(tops.data()), tops.size() * sizeof(int32_t));
    key += accept ? '1' : '0';
    const auto [it, inserted] = config_ids_.try_emplace(std::move(key), static_cast<int32_t>(configs_.size()));
    if (inserted) {
        configs_.push_back({std::move(tops), accept});
        rows_.emplace_back();
        rows_.back().fill(kUnknown);
        plain_next_.push_back(kUnknown);
    }
    return it->second;
}

int32_t Grammar::Impl::compute_step(int32_t config, uint8_t byte) {
    std::vector<int32_t> tops;
    bool accept = false;
    std::vector<uint64_t> seen;
    const std::vector<int32_t> from = configs_[config].tops;  // configs_ may grow below
    for (int32_t n : from) {
        for (const Network::ByteEdge& e : net.states[node_state_[n]].bytes) {
            if (e.lo <= byte && byte <= e.hi) closure(e.to, node_parent_[n], tops, accept, seen);
        }
    }
    const int32_t next = intern(std::move(tops), accept);
    rows_[config][byte] = next;
    return next;
}

bool Grammar::Impl::accepting(int32_t config) {
    std::lock_guard<std::mutex> lock(mutex);
    return configs_[config].accept;
}

int32_t Grammar::Impl::step(int32_t config, std::string_view bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    for (unsigned char b : bytes) {
        if (config == kDead) break;
        config = step_locked(config, b);
    }
    return config;
}

}  // namespace deskside::engine
