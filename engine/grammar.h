// Grammar-constrained sampling: structured outputs (response_format json_schema / json_object) and
// tool-call envelopes.
//
// A GrammarBuilder composes byte-level rules (literals, byte sets, sequences, choices, bounded or
// unbounded repeats, forward rules for recursion, JSON Schema) into an immutable Grammar. The grammar
// is compiled to a recursive transition network over bytes; a parse state is the set of live stacks,
// interned, so equal states share one id and one cached token mask.
//
// A GrammarVocab is a trie over the bytes every token stands for (Tokenizer::piece), built once per
// tokenizer. A GrammarMatcher follows one generating sequence: apply() bans every token whose bytes
// cannot continue the grammar (walking the trie against the parse state, memoised per state), accept()
// advances. Control tokens that do not end generation (Qwen's <tool_call>) count as their text;
// end-of-generation tokens are allowed only where the grammar is complete; empty pieces never.
//
// Thread safety: a Grammar and a GrammarVocab may be shared by matchers on many threads. The caches
// they fill (parse states, transitions, masks) are guarded by a mutex inside the Grammar.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace deskside::models {
class Tokenizer;
}

namespace deskside::engine {

// A schema that cannot be enforced. path is where in the schema ("properties.age.exclusiveMinimum"),
// keyword the keyword at fault; what() names both.
struct SchemaError : std::runtime_error {
    SchemaError(std::string path, std::string keyword, const std::string& why);
    std::string path;
    std::string keyword;
};

class Grammar {
   public:
    struct Impl;
    explicit Grammar(std::unique_ptr<Impl> impl);
    ~Grammar();
    Grammar(const Grammar&) = delete;
    Grammar& operator=(const Grammar&) = delete;

    // States of the compiled network (a size measure for tests and logs).
    size_t n_states() const;
    // Whether `text` is a complete sentence of the grammar / a prefix of one.
    bool matches(std::string_view text) const;
    bool is_prefix(std::string_view text) const;

    Impl& impl() const { return *impl_; }

   private:
    std::unique_ptr<Impl> impl_;
};

class GrammarBuilder {
   public:
    using Rule = int32_t;

    GrammarBuilder();
    ~GrammarBuilder();

    Rule literal(std::string_view bytes);
    Rule byte_set(const std::bitset<256>& bytes);  // one byte out of the set
    Rule byte_range(uint8_t lo, uint8_t hi);
    Rule sequence(std::vector<Rule> rules);
    Rule choice(std::vector<Rule> rules);
    // min..max copies of r (max -1: unbounded), separated by `separator` when given.
    Rule repeat(Rule r, int64_t min, int64_t max, std::optional<Rule> separator = {});
    // A rule to be defined later: recursion (a JSON value inside an array inside a value).
    Rule forward();
    void define(Rule forward_rule, Rule body);

    // A JSON value valid against the schema, in compact form (see json_schema.h for the whitespace
    // rule and the keywords enforced). Throws SchemaError.
    Rule json_schema(const nlohmann::ordered_json& schema);
    Rule any_json_value();
    Rule any_json_object();

    // Throws std::invalid_argument for an undefined forward rule or left recursion.
    std::shared_ptr<const Grammar> build(Rule root);

    struct Node;

   private:
    Rule add(Node node);
    std::vector<Node> nodes_;
    std::optional<Rule> any_value_;  // the generic JSON value, made once per builder
};

std::shared_ptr<const Grammar> json_schema_grammar(const nlohmann::ordered_json& schema);  // throws SchemaError
std::shared_ptr<const Grammar> json_object_grammar();

// The vocabulary as a byte trie, built once per tokenizer and shared by all matchers.
class GrammarVocab {
   public:
    explicit GrammarVocab(const models::Tokenizer& tokenizer);
    ~GrammarVocab();
    GrammarVocab(const GrammarVocab&) = delete;
    GrammarVocab& operator=(const GrammarVocab&) = delete;

    int32_t n_vocab() const;
    // The bytes the grammar sees for a token ("" for tokens that never take part).
    const std::string& text(int32_t token) const;
    bool is_eog(int32_t token) const;

    struct Impl;
    const Impl& impl() const { return *impl_; }

   private:
    std::unique_ptr<Impl> impl_;
};

class GrammarMatcher {
   public:
    GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab);

    // Sets -inf on every token that cannot continue the grammar (and on logits past the vocabulary).
    void apply(std::span<float> logits) const;
    // Advances; false (state unchanged) when the token is not allowed.
    bool accept(int32_t token);
    // Advances over raw bytes (the text after a lazy grammar's trigger); false (state unchanged)
    // when they cannot continue the grammar.
    bool accept_bytes(std::string_view bytes);
    bool complete() const;
    // Whether token would be accepted now (the mask bit).
    bool allowed(int32_t token) const;

   private:
    std::shared_ptr<const Grammar> grammar_;
    std::shared_ptr<const GrammarVocab> vocab_;
    int32_t state_;       // interned parse state
    bool ended_ = false;  // an end-of-generation token was accepted
};

}  // namespace deskside::engine
