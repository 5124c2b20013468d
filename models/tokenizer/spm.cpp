// SentencePiece BPE as llama.cpp runs it on a GGUF vocabulary: start from single characters,
// repeatedly merge the adjacent pair whose concatenation is the highest-scoring token (the
// leftmost pair on ties), then emit each final symbol as its token, or as <0xNN> byte tokens
// when it is not in the vocabulary. Every token takes part in merges, control tokens included,
// as in llama.cpp.
// ref: https://github.com/google/sentencepiece/blob/master/src/bpe_model.cc
#include <queue>
#include <stdexcept>

#include "models/tokenizer/encoder.h"
#include "models/tokenizer/utf8.h"

namespace deskside::models::tokenizer {

namespace {

struct Symbol {
    int prev;
    int next;
    size_t offset;  // into the escaped text
    size_t size;    // 0 once merged into its left neighbour
};

struct Bigram {
    int left;
    int right;
    float score;
    size_t size;  // bytes of the merged text, to notice pairs that changed since queued
};

struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

class SpmEncoder final : public Encoder {
   public:
    explicit SpmEncoder(const Vocab& vocab) : vocab_(vocab) {
        // Whether every token keeps U+2581 to a leading run ("▁▁the" but never "a▁b").
        for (const std::string& t : vocab.texts) {
            size_t first = 0;
            while (t.compare(first, kSpmSpace.size(), kSpmSpace) == 0) first += kSpmSpace.size();
            if (first < t.size() && t.find(kSpmSpace, first) != std::string::npos) {
                words_independent_ = false;
                break;
            }
        }
    }

    void encode(std::string_view fragment, std::vector<int32_t>& out) const override {
        std::string raw;
        if (vocab_.add_space_prefix) raw += ' ';
        raw.append(fragment);
        const std::string escaped = escape_spaces(raw);
        const std::string_view text = escaped;
        if (!words_independent_) {
            encode_segment(text, out);
            return;
        }
        // Cut before every U+2581 that follows another character: no token spans such a cut,
        // so the words merge independently, with the same result and far smaller queues.
        size_t start = 0;
        bool prev_space = true;
        for (size_t pos = 0; pos < text.size();) {
            const bool space = text.compare(pos, kSpmSpace.size(), kSpmSpace) == 0;
            if (space && !prev_space) {
                encode_segment(text.substr(start, pos - start), out);
                start = pos;
            }
            prev_space = space;
            pos += std::min(utf8_sequence_length(static_cast<uint8_t>(text[pos])), text.size() - pos);
        }
        encode_segment(text.substr(start), out);
    }

   private:
    void encode_segment(std::string_view text, std::vector<int32_t>& out) const {
        std::vector<Symbol> symbols;
        symbols.reserve(text.size());
        for (size_t off = 0; off < text.size();) {
            const size_t n = std::min(utf8_sequence_length(static_cast<uint8_t>(text[off])), text.size() - off);
            const int index = static_cast<int>(symbols.size());
            symbols.push_back({index - 1, off + n == text.size() ? -1 : index + 1, off, n});
            off += n;
        }

        std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
        auto try_add = [&](int left, int right) {
            if (left < 0 || right < 0) return;
            const size_t size = symbols[left].size + symbols[right].size;
            const int32_t id = vocab_.find(text.substr(symbols[left].offset, size));
            if (id == Vocab::kNone) return;
            queue.push({left, right, vocab_.scores[id], size});
        };
        for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

        while (!queue.empty()) {
            const Bigram b = queue.top();
            queue.pop();
            Symbol& left = symbols[b.left];
            Symbol& right = symbols[b.right];
            if (left.size == 0 || right.size == 0 || left.size + right.size != b.size) continue;
            left.size += right.size;
            right.size = 0;
            left.next = right.next;
            if (right.next >= 0) symbols[right.next].prev = b.left;
            try_add(left.prev, b.left);
            try_add(b.left, left.next);
        }

        for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
            const std::string_view piece = text.substr(symbols[i].offset, symbols[i].size);
            if (const int32_t id = vocab_.find(piece); id != Vocab::kNone) {
                out.push_back(id);
                continue;
            }
            for (char c : piece) out.push_back(byte_fallback(static_cast<uint8_t>(c)));
        }
    }

    int32_t byte_fallback(uint8_t byte) const {
        if (const int32_t id = vocab_.byte_token(byte); id != Vocab::kNone) return id;
        if (vocab_.unk != Vocab::kNone) return vocab_.unk;
        throw std::runtime_error("SentencePiece vocabulary has neither a token for byte " + std::to_string(byte) +
                                 " nor an unknown token");
    }

    const Vocab& vocab_;
    bool words_independent_ = true;
};

}  // namespace

std::unique_ptr<Encoder> make_spm_encoder(const Vocab& vocab) { return std::make_unique<SpmEncoder>(vocab); }

}  // namespace deskside::models::tokenizer
