// Ranked-merge BPE: cut the text into words with the pre-tokenizer regexes, encode each word
// (GPT-2 byte-level symbols, or raw UTF-8 for SentencePiece-style vocabularies), then merge the
// adjacent pair with the lowest merge rank (leftmost on ties) until no pair is a merge.
// ref: https://github.com/openai/gpt-2/blob/master/src/encoder.py (bpe)
#include <queue>

#include "models/tokenizer/encoder.h"
#include "models/tokenizer/regex_split.h"
#include "models/tokenizer/utf8.h"

namespace deskside::models::tokenizer {

namespace {

struct Symbol {
    int prev;
    int next;
    size_t offset;
    size_t size;  // 0 once merged into its left neighbour
    int32_t id;   // the token the symbol's text is, or Vocab::kNone
};

struct Bigram {
    int left;
    int right;
    int rank;
    size_t left_size;  // sizes when queued: a changed symbol makes the pair stale
    size_t right_size;
};

struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

bool all_newlines(std::string_view s) { return s.find_first_not_of('\n') == std::string_view::npos; }

class BpeEncoder final : public Encoder {
   public:
    BpeEncoder(const Vocab& vocab, const PreTokenizerSpec& spec)
        : vocab_(vocab), spec_(spec), splitter_(spec.patterns) {}

    void encode(std::string_view fragment, std::vector<int32_t>& out) const override {
        std::string text = sanitize_utf8(fragment);
        if (spec_.escape_whitespace) text = escape_spaces(text);
        for (std::string_view word : splitter_.split(text)) {
            if (spec_.byte_level) {
                encode_word(byte_level_encode(word), out);
            } else {
                encode_word(word, out);
            }
        }
    }

   private:
    void encode_word(std::string_view word, std::vector<int32_t>& out) const {
        if (vocab_.ignore_merges || (!spec_.byte_level && all_newlines(word))) {
            // The whole word is a token: take it as is (for runs of newlines in SentencePiece-style
            // vocabularies, merges would not rebuild the dedicated token).
            if (const int32_t id = vocab_.find(word); id != Vocab::kNone) {
                out.push_back(id);
                return;
            }
        }
        std::vector<Symbol> symbols;
        symbols.reserve(word.size());
        for (size_t off = 0; off < word.size();) {
            const size_t n = std::min(utf8_sequence_length(static_cast<uint8_t>(word[off])), word.size() - off);
            const int index = static_cast<int>(symbols.size());
            symbols.push_back({index - 1, off + n == word.size() ? -1 : index + 1, off, n, vocab_.find(word.substr(off, n))});
            off += n;
        }
        std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
        auto try_add = [&](int left, int right) {
            if (left < 0 || right < 0) return;
            const Symbol& l = symbols[left];
            const Symbol& r = symbols[right];
            const int rank = l.id != Vocab::kNone && r.id != Vocab::kNone
                                 ? vocab_.merge_rank(l.id, r.id)
                                 : vocab_.merge_rank(word.substr(l.offset, l.size), word.substr(r.offset, r.size));
            if (rank < 0) return;
            queue.push({left, right, rank, l.size, r.size});
        };
        for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

        while (!queue.empty()) {
            const Bigram b = queue.top();
            queue.pop();
            Symbol& left = symbols[b.left];
            Symbol& right = symbols[b.right];
            if (left.size != b.left_size || right.size != b.right_size || left.size == 0 || right.size == 0) continue;
            left.size += right.size;
            left.id = vocab_.find(word.substr(left.offset, left.size));
            right.size = 0;
            left.next = right.next;
            if (right.next >= 0) symbols[right.next].prev = b.left;
            try_add(left.prev, b.left);
            try_add(b.left, left.next);
        }

        for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
            const std::string_view piece = word.substr(symbols[i].offset, symbols[i].size);
            if (symbols[i].id != Vocab::kNone) {
                out.push_back(symbols[i].id);
                continue;
            }
            // Not a token: one token per byte where the vocabulary has one (byte-level
            // vocabularies always do for the symbols; raw-UTF-8 ones through <0xNN>).
            for (char c : piece) {
                int32_t id;
                if (spec_.byte_level) {
                    id = vocab_.find(std::string_view(&c, 1));
                } else {
                    id = vocab_.byte_token(static_cast<uint8_t>(c));
                }
                if (id != Vocab::kNone) out.push_back(id);
            }
        }
    }

    const Vocab& vocab_;
    PreTokenizerSpec spec_;
    RegexSplitter splitter_;
};

}  // namespace

std::unique_ptr<Encoder> make_bpe_encoder(const Vocab& vocab, const PreTokenizerSpec& spec) {
    return std::make_unique<BpeEncoder>(vocab, spec);
}

}  // namespace deskside::models::tokenizer
