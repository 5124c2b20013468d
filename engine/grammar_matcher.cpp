// The vocabulary trie, token masks and GrammarMatcher.
//
// A mask is computed once per (parse state, vocabulary) by walking the trie depth first: a child
// edge is followed only while the parse state reached by its bytes is alive, so a structural state
// ("expecting , or }") prunes at the root and an open string visits most of the trie. Transitions
// are memoised per parse state (a 256-way row), masks per parse state, both inside the Grammar, so
// every matcher of the same grammar and vocabulary reuses them.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "engine/grammar.h"
#include "engine/grammar_internal.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::engine {

namespace {

// A bound on the memory the masks of one grammar may take per vocabulary; past it they are
// dropped and recomputed on demand (parse states stay).
constexpr size_t kMaxMaskBytes = size_t{64} << 20;

using TrieNode = GrammarVocab::Impl::TrieNode;

// For each value of a mask byte, its eight lanes as all-ones (kept) or zero (banned).
const std::array<std::array<uint32_t, 8>, 256>& byte_lanes() {
    static const auto table = [] {
        std::array<std::array<uint32_t, 8>, 256> t{};
        for (int b = 0; b < 256; ++b) {
            for (int j = 0; j < 8; ++j) t[b][j] = ((b >> j) & 1) ? ~uint32_t{0} : 0;
        }
        return t;
    }();
    return table;
}

bool plain_ascii(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

// The byte ranges of each well-formed UTF-8 sequence of two to four bytes (RFC 3629 table 3-7).
struct Utf8Form {
    int n;
    std::array<std::pair<uint8_t, uint8_t>, 4> ranges;
};
constexpr std::array<Utf8Form, 8> kUtf8Forms = {{
    {2, {{{0xc2, 0xdf}, {0x80, 0xbf}}}},
    {3, {{{0xe0, 0xe0}, {0xa0, 0xbf}, {0x80, 0xbf}}}},
    {3, {{{0xe1, 0xec}, {0x80, 0xbf}, {0x80, 0xbf}}}},
    {3, {{{0xed, 0xed}, {0x80, 0x9f}, {0x80, 0xbf}}}},
    {3, {{{0xee, 0xef}, {0x80, 0xbf}, {0x80, 0xbf}}}},
    {4, {{{0xf0, 0xf0}, {0x90, 0xbf}, {0x80, 0xbf}, {0x80, 0xbf}}}},
    {4, {{{0xf1, 0xf3}, {0x80, 0xbf}, {0x80, 0xbf}, {0x80, 0xbf}}}},
    {4, {{{0xf4, 0xf4}, {0x80, 0x8f}, {0x80, 0xbf}, {0x80, 0xbf}}}},
}};

// The length in characters of a plain token, 0 for one that is not plain.
size_t plain_chars(std::string_view s) {
    size_t chars = 0;
    for (size_t i = 0; i < s.size(); ++chars) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            if (!plain_ascii(c)) return 0;
            ++i;
            continue;
        }
        bool ok = false;
        for (const Utf8Form& f : kUtf8Forms) {
            if (c < f.ranges[0].first || c > f.ranges[0].second || i + f.n > s.size()) continue;
            ok = true;
            for (int k = 1; k < f.n; ++k) {
                const unsigned char d = static_cast<unsigned char>(s[i + k]);
                ok = ok && d >= f.ranges[k].first && d <= f.ranges[k].second;
            }
            if (ok) {
                i += f.n;
                break;
            }
        }
        if (!ok) return 0;
    }
    return chars;
}

// Children of the node for sorted[lo, hi) that share `depth` leading bytes; appended contiguously.
void build_trie(GrammarVocab::Impl& v, const std::vector<std::pair<std::string_view, int32_t>>& sorted, size_t lo,
                size_t hi, size_t depth, uint32_t node) {
    v.nodes[node].first_token = static_cast<uint32_t>(v.tokens.size());
    while (lo < hi && sorted[lo].first.size() == depth) v.tokens.push_back(sorted[lo++].second);
    v.nodes[node].n_tokens = static_cast<uint32_t>(v.tokens.size() - v.nodes[node].first_token);
    std::vector<std::pair<size_t, size_t>> groups;
    for (size_t i = lo; i < hi;) {
        size_t j = i + 1;
        while (j < hi && sorted[j].first[depth] == sorted[i].first[depth]) ++j;
        groups.emplace_back(i, j);
        i = j;
    }
    const uint32_t first = static_cast<uint32_t>(v.nodes.size());
    v.nodes[node].first_child = first;
    v.nodes[node].n_children = static_cast<uint16_t>(groups.size());
    v.nodes.resize(v.nodes.size() + groups.size());
    bool all_plain = true;
    for (uint32_t t = v.nodes[node].first_token; t < v.nodes[node].first_token + v.nodes[node].n_tokens; ++t) {
        all_plain = all_plain && plain_chars(v.texts[v.tokens[t]]) > 0;
    }
    for (size_t g = 0; g < groups.size(); ++g) {
        v.nodes[first + g].byte = static_cast<uint8_t>(sorted[groups[g].first].first[depth]);
        build_trie(v, sorted, groups[g].first, groups[g].second, depth + 1, static_cast<uint32_t>(first + g));
        all_plain = all_plain && v.nodes[first + g].all_plain;
    }
    v.nodes[node].all_plain = all_plain && node != 0;
}

}  // namespace

GrammarVocab::GrammarVocab(const models::Tokenizer& tokenizer) : impl_(std::make_unique<Impl>()) {
    Impl& v = *impl_;
    const int32_t n = tokenizer.n_vocab();
    v.texts.resize(n);
    v.eog_flag.assign(n, 0);
    std::vector<std::pair<std::string_view, int32_t>> sorted;
    for (int32_t id = 0; id < n; ++id) {
        if (tokenizer.is_eog(id)) {
            v.eog.push_back(id);
            v.eog_flag[id] = 1;
            continue;
        }
        // Control tokens that do not end generation stand for their text (a <tool_call> token
        // writes "<tool_call>"); unknown and unused tokens have no bytes and never take part.
        v.texts[id] = tokenizer.piece(id, tokenizer.is_control(id));
    }
    for (int32_t id = 0; id < n; ++id) {
        if (!v.texts[id].empty()) sorted.emplace_back(v.texts[id], id);
    }
    std::sort(sorted.begin(), sorted.end());
    v.plain_up_to.assign(kPlainBuckets + 2, std::vector<uint64_t>((n + 63) / 64, 0));
    for (const auto& [text, id] : sorted) {
        const size_t chars = plain_chars(text);
        if (chars) v.plain_up_to[std::min<size_t>(chars, kPlainBuckets + 1)][id >> 6] |= uint64_t{1} << (id & 63);
    }
    for (size_t len = 2; len < v.plain_up_to.size(); ++len) {
        for (size_t w = 0; w < v.plain_up_to[len].size(); ++w) v.plain_up_to[len][w] |= v.plain_up_to[len - 1][w];
    }
    v.nodes.resize(1);
    build_trie(v, sorted, 0, sorted.size(), 0, 0);
}

GrammarVocab::~GrammarVocab() = default;
int32_t GrammarVocab::n_vocab() const { return static_cast<int32_t>(impl_->texts.size()); }
const std::string& GrammarVocab::text(int32_t token) const { return impl_->texts.at(token); }
bool GrammarVocab::is_eog(int32_t token) const { return impl_->eog_flag.at(token) != 0; }

Grammar::Impl::Mask Grammar::Impl::compute_mask(int32_t config, const GrammarVocab& vocab) {
    const GrammarVocab::Impl& v = vocab.impl();
    Mask bits((v.texts.size() + 63) / 64, 0);
    const auto allow = [&](const TrieNode& n) {
        for (uint32_t i = 0; i < n.n_tokens; ++i) {
            const int32_t id = v.tokens[n.first_token + i];
            bits[id >> 6] |= uint64_t{1} << (id & 63);
        }
    };
    if (configs_[config].accept) {
        for (int32_t id : v.eog) bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    // Follow the plain-character chain: each length bucket is allowed while the chain is alive. It
    // settles every plain token when it dies or comes back to a config it passed (an open string).
    std::vector<int32_t> chain{config};
    bool skip_plain = false;
    while (static_cast<int>(chain.size()) <= kPlainBuckets) {
        const int32_t next = plain_successor(chain.back());
        if (next == kMixed) break;
        skip_plain = next == kDead || std::find(chain.begin(), chain.end(), next) != chain.end();
        if (skip_plain) break;
        chain.push_back(next);
    }
    if (skip_plain) {
        // A cycle keeps every length alive; a chain that dies after D configs keeps lengths below D.
        const bool cycle = plain_successor(chain.back()) != kDead;
        const std::vector<uint64_t>& up_to = v.plain_up_to[cycle ? kPlainBuckets + 1 : chain.size() - 1];
        for (size_t w = 0; w < bits.size(); ++w) bits[w] |= up_to[w];
    }
    struct Item {
        uint32_t node;
        int32_t config;
    };
    std::vector<Item> todo{{0, config}};
    while (!todo.empty()) {
        const Item it = todo.back();
        todo.pop_back();
        const TrieNode& parent = v.nodes[it.node];
        for (uint32_t c = parent.first_child; c < parent.first_child + parent.n_children; ++c) {
            const TrieNode& child = v.nodes[c];
            if (skip_plain && child.all_plain) continue;  // all allowed already
            const int32_t next = step_locked(it.config, child.byte);
            if (next == kDead) continue;
            allow(child);
            if (child.n_children) todo.push_back({c, next});
        }
    }
    return bits;
}

int32_t Grammar::Impl::plain_successor(int32_t config) {
    if (plain_next_[config] != kUnknown) return plain_next_[config];
    int32_t to = kUnknown;  // the one config all plain characters lead to, so far
    const auto same = [&](int32_t t) {
        if (to == kUnknown) to = t;
        return to == t;
    };
    bool uniform = true;
    for (int b = 0x20; b < 0x80 && uniform; ++b) {
        if (plain_ascii(static_cast<unsigned char>(b))) uniform = same(step_locked(config, static_cast<uint8_t>(b)));
    }
    // Each multi-byte form, byte range by byte range, over the set of configs it can be in.
    for (const Utf8Form& f : kUtf8Forms) {
        std::vector<int32_t> at{config};
        for (int k = 0; k < f.n && uniform; ++k) {
            std::vector<int32_t> next;
            for (int32_t c : at) {
                for (int b = f.ranges[k].first; b <= f.ranges[k].second; ++b) {
                    const int32_t t = c == kDead ? kDead : step_locked(c, static_cast<uint8_t>(b));
                    if (std::find(next.begin(), next.end(), t) == next.end()) next.push_back(t);
                }
            }
            at = std::move(next);
        }
        uniform = uniform && at.size() == 1 && same(at[0]);
        if (!uniform) break;
    }
    plain_next_[config] = uniform ? to : kMixed;
    return plain_next_[config];
}

std::shared_ptr<const Grammar::Impl::Mask> Grammar::Impl::mask(int32_t config,
                                                               const std::shared_ptr<const GrammarVocab>& vocab) {
    std::lock_guard<std::mutex> lock(mutex);
    MaskSet* set = nullptr;
    for (auto it = masks_.begin(); it != masks_.end();) {
        const auto held = it->vocab.lock();
        if (!held) {
            it = masks_.erase(it);
            continue;
        }
        if (held == vocab) set = &*it;
        ++it;
    }
    if (!set) {
        masks_.push_back({vocab, {}, 0});
        set = &masks_.back();
    }
    if (set->by_config.size() <= static_cast<size_t>(config)) set->by_config.resize(configs_.size());
    if (!set->by_config[config]) {
        const size_t bytes = (vocab->impl().texts.size() + 63) / 64 * sizeof(uint64_t);
        if ((set->n_cached + 1) * bytes > kMaxMaskBytes) {
            for (auto& m : set->by_config) m.reset();
            set->n_cached = 0;
        }
        set->by_config[config] = std::make_shared<const Mask>(compute_mask(config, *vocab));
        ++set->n_cached;
    }
    return set->by_config[config];
}

// ---- matcher -------------------------------------------------------------------------------------

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), state_(grammar_->impl().initial()) {}

void GrammarMatcher::apply(std::span<float> logits) const {
    constexpr float kBanned = -std::numeric_limits<float>::infinity();
    const size_t n_vocab = vocab_->impl().texts.size();
    if (ended_) {
        std::fill(logits.begin(), logits.end(), kBanned);
        return;
    }
    const auto mask = grammar_->impl().mask(state_, vocab_);
    const size_t n = std::min(n_vocab, logits.size());
    float* out = logits.data();
    // Whole words branch-free, eight logits per mask byte through a lane table (the compiler
    // vectorises it): a bit-by-bit loop over the banned tokens took most of a token's grammar
    // time inside strings, where the masks are neither empty nor full.
    const auto& keep_lanes = byte_lanes();
    const uint32_t banned_bits = std::bit_cast<uint32_t>(kBanned);
    const size_t whole = n / 64;
    for (size_t w = 0; w < whole; ++w) {
        const uint64_t bits = (*mask)[w];
        if (bits == ~uint64_t{0}) continue;
        float* o = out + w * 64;
        if (bits == 0) {
            std::fill(o, o + 64, kBanned);
            continue;
        }
        for (int b = 0; b < 8; ++b, o += 8) {
            const std::array<uint32_t, 8>& keep = keep_lanes[(bits >> (8 * b)) & 0xff];
            for (int j = 0; j < 8; ++j) {
                const uint32_t v = std::bit_cast<uint32_t>(o[j]);
                o[j] = std::bit_cast<float>((v & keep[j]) | (banned_bits & ~keep[j]));
            }
        }
    }
    for (size_t i = whole * 64; i < n; ++i) {
        if (!(((*mask)[i / 64] >> (i % 64)) & 1)) out[i] = kBanned;
    }
    if (logits.size() > n) std::fill(logits.begin() + static_cast<std::ptrdiff_t>(n), logits.end(), kBanned);
}

bool GrammarMatcher::allowed(int32_t token) const {
    if (ended_ || token < 0 || token >= vocab_->n_vocab()) return false;
    Grammar::Impl& g = grammar_->impl();
    if (vocab_->is_eog(token)) return g.accepting(state_);
    const std::string& text = vocab_->text(token);
    return !text.empty() && g.step(state_, text) != kDead;
}

bool GrammarMatcher::accept(int32_t token) {
    if (!allowed(token)) return false;
    if (vocab_->is_eog(token)) {
        ended_ = true;
    } else {
        state_ = grammar_->impl().step(state_, vocab_->text(token));
    }
    return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
    if (ended_) return bytes.empty();
    if (bytes.empty()) return true;
    const int32_t next = grammar_->impl().step(state_, bytes);
    if (next == kDead) return false;
    state_ = next;
    return true;
}

bool GrammarMatcher::complete() const { return ended_ || grammar_->impl().accepting(state_); }

}  // namespace deskside::engine
