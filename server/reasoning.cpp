#include "server/reasoning.h"

namespace deskside::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view text, std::string_view tag) {
    for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
        if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
    return 0;
}

}  // namespace

bool template_thinks(std::string_view source) {
    return source.find(kOpen) != std::string_view::npos && source.find(kClose) != std::string_view::npos;
}

ReasoningSplitter::ReasoningSplitter(std::string_view prompt) : state_(State::kStart) {
    // The prompt ends inside a block when its last <think> has no </think> after it.
    const size_t open = prompt.rfind(kOpen);
    if (open != std::string_view::npos && prompt.find(kClose, open) == std::string_view::npos) state_ = State::kReasoning;
}

ReasoningSplitter::Parts ReasoningSplitter::push(std::string_view text) {
    Parts out;
    pending_ += text;
    for (;;) {
        switch (state_) {
            case State::kStart: {
                // Leading whitespace, then either <think> (reasoning follows) or the answer itself.
                const size_t first = pending_.find_first_not_of(" \t\r\n");
                if (first == std::string::npos) return out;
                const std::string_view rest = std::string_view(pending_).substr(first);
                if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // undecided
                if (rest.substr(0, kOpen.size()) == kOpen) {
                    pending_.erase(0, first + kOpen.size());
                    state_ = State::kReasoning;
                } else {
                    state_ = State::kContent;
                }
                break;
            }
            case State::kReasoning: {
                if (!reasoning_begun_) {
                    const size_t first = pending_.find_first_not_of(" \t\r\n");
                    pending_.erase(0, first == std::string::npos ? pending_.size() : first);
                    if (pending_.empty()) return out;
                    reasoning_begun_ = true;
                }
                const size_t close = pending_.find(kClose);
                if (close != std::string::npos) {
                    const std::string_view body = std::string_view(pending_).substr(0, close);
                    const size_t end = body.find_last_not_of(" \t\r\n");
                    out.reasoning += body.substr(0, end == std::string_view::npos ? 0 : end + 1);
                    pending_.erase(0, close + kClose.size());
                    state_ = State::kAfter;
                    break;
                }
                // Hold back a possible "</thi" and the whitespace before it (it may end the block).
                const size_t tag = partial_tag(pending_, kClose);
                const size_t last = std::string_view(pending_).substr(0, pending_.size() - tag).find_last_not_of(" \t\r\n");
                const size_t emit = last == std::string_view::npos ? 0 : last + 1;
                out.reasoning += pending_.substr(0, emit);
                pending_.erase(0, emit);
                return out;
            }
            case State::kAfter: {
                const size_t first = pending_.find_first_not_of(" \t\r\n");
                pending_.erase(0, first == std::string::npos ? pending_.size() : first);
                if (pending_.empty()) return out;
                state_ = State::kContent;
                break;
            }
            case State::kContent:
                out.content += pending_;
                pending_.clear();
                return out;
        }
    }
}

ReasoningSplitter::Parts ReasoningSplitter::flush() {
    Parts out;
    if (state_ == State::kReasoning) {
        const size_t end = pending_.find_last_not_of(" \t\r\n");
        out.reasoning = pending_.substr(0, end == std::string::npos ? 0 : end + 1);
    } else if (state_ != State::kAfter) {
        out.content = std::move(pending_);
    }
    pending_.clear();
    return out;
}

}  // namespace deskside::server
