// The compiled form of a Grammar, shared by grammar.cpp (building, parse states) and
// grammar_matcher.cpp (the vocabulary trie and the token masks). Private to engine/.
//
// A grammar is a recursive transition network over bytes: each rule is an automaton whose states
// have byte-range edges, epsilon edges and call edges (enter a rule, continue at `ret` when it
// finishes). A parse stack is an interned linked list of nodes (state, parent node); a parse state
// ("config") is the sorted set of stack tops that can read a byte next, plus whether some stack has
// finished the root rule. Configs are interned, so each has an id, a lazily filled 256-way
// transition row and, per vocabulary, a cached token mask.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar.h"

namespace deskside::engine {

struct GrammarBuilder::Node {
    enum class Kind { kBytes, kSet, kSequence, kChoice, kRepeat, kForward };
    Kind kind = Kind::kBytes;
    std::string bytes;           // kBytes
    std::bitset<256> set;        // kSet
    std::vector<Rule> children;  // kSequence, kChoice; kRepeat: {item}; kForward: {body} once defined
    int64_t min = 0;             // kRepeat
    int64_t max = 0;             // kRepeat, -1 unbounded
    Rule separator = -1;         // kRepeat, -1 none
};

struct Network {
    struct ByteEdge {
        uint8_t lo;
        uint8_t hi;
        int32_t to;
    };
    struct Call {
        int32_t rule;
        int32_t ret;
    };
    struct State {
        std::vector<ByteEdge> bytes;
        std::vector<int32_t> eps;
        std::vector<Call> calls;
        bool final = false;  // the rule this state belongs to may end here
    };
    std::vector<State> states;
    std::vector<int32_t> rule_start;
    int32_t root_rule = 0;
};

constexpr int32_t kDead = -1;       // no stack survives
constexpr int32_t kUnknown = -2;    // transition not computed yet
constexpr int32_t kMixed = -3;      // plain characters lead to different configs
constexpr int kPlainBuckets = 256;  // plain tokens are grouped by length up to this many characters

struct Grammar::Impl {
    using Mask = std::vector<uint64_t>;  // one bit per token id

    explicit Impl(Network network);

    // All of these take `mutex` themselves except the *_locked ones, which expect it held.
    int32_t initial() const { return initial_; }
    bool accepting(int32_t config);
    int32_t step(int32_t config, std::string_view bytes);
    std::shared_ptr<const Mask> mask(int32_t config, const std::shared_ptr<const GrammarVocab>& vocab);

    // The config every plain JSON-string character (see GrammarVocab::Impl::plain_up_to) leads to
    // from `config` when they all lead to the same one (kDead included), else kMixed. Along such a
    // chain a plain token's fate depends only on its length in characters, so masks set plain
    // tokens by length instead of walking the trie for them.
    int32_t plain_successor(int32_t config);

    int32_t step_locked(int32_t config, uint8_t byte) {
        const int32_t t = rows_[config][byte];
        return t != kUnknown ? t : compute_step(config, byte);
    }

    Network net;
    std::mutex mutex;

   private:
    struct Config {
        std::vector<int32_t> tops;
        bool accept = false;
    };
    struct MaskSet {
        std::weak_ptr<const GrammarVocab> vocab;
        std::vector<std::shared_ptr<const Mask>> by_config;
        size_t n_cached = 0;
    };

    int32_t node(int32_t state, int32_t parent);
    void closure(int32_t state, int32_t parent, std::vector<int32_t>& tops, bool& accept, std::vector<uint64_t>& seen);
    int32_t intern(std::vector<int32_t> tops, bool accept);
    int32_t compute_step(int32_t config, uint8_t byte);
    Mask compute_mask(int32_t config, const GrammarVocab& vocab);

    std::vector<int32_t> node_state_;
    std::vector<int32_t> node_parent_;
    std::unordered_map<uint64_t, int32_t> node_ids_;
    std::vector<Config> configs_;
    std::unordered_map<std::string, int32_t> config_ids_;
    std::vector<std::array<int32_t, 256>> rows_;
    std::vector<int32_t> plain_next_;  // by config: plain_successor, kUnknown until computed
    std::vector<MaskSet> masks_;
    int32_t initial_ = kDead;
};

// The vocabulary trie: children of a node are contiguous and sorted by byte; node 0 is the root.
struct GrammarVocab::Impl {
    struct TrieNode {
        uint32_t first_child = 0;
        uint32_t first_token = 0;
        uint32_t n_tokens = 0;
        uint16_t n_children = 0;
        uint8_t byte = 0;
        bool all_plain = false;  // every token at or below this node is plain
    };
    std::vector<TrieNode> nodes;
    std::vector<int32_t> tokens;     // ids ending at each node, by TrieNode::first_token
    std::vector<std::string> texts;  // by id
    std::vector<int32_t> eog;        // end-of-generation ids
    std::vector<uint8_t> eog_flag;   // by id
    // Plain tokens: their bytes are whole characters a JSON string holds unescaped (printable ASCII
    // but " and \, well-formed UTF-8). Bit sets by length in characters: [n] holds those of 1 .. n
    // characters (n <= kPlainBuckets), [kPlainBuckets + 1] all of them. Inside a string they move the
    // parse state by their length only, which lets a mask skip the trie below all_plain nodes.
    std::vector<std::vector<uint64_t>> plain_up_to;
};

}  // namespace deskside::engine
