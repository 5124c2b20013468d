#define PCRE2_CODE_UNIT_WIDTH 8
#include "models/tokenizer/regex_split.h"

#include <pcre2.h>

#include <stdexcept>

namespace deskside::models::tokenizer {

namespace {

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof(buf));
    return reinterpret_cast<const char*>(buf);
}

// One JIT stack per thread, grown on demand up to 1 MiB: long runs of letters or spaces
// under nested quantifiers need more than PCRE2's 32 KiB default.
struct JitStack {
    pcre2_jit_stack* stack = nullptr;
    pcre2_match_context* context = nullptr;
    JitStack() {
        stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
        context = pcre2_match_context_create(nullptr);
        if (stack && context) pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~JitStack() {
        pcre2_match_context_free(context);
        pcre2_jit_stack_free(stack);
    }
};

}  // namespace

struct RegexSplitter::Compiled {
    std::string pattern;
    pcre2_code* code = nullptr;
    ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& patterns) {
    for (const std::string& p : patterns) {
        auto c = std::make_unique<Compiled>();
        c->pattern = p;
        int err = 0;
        PCRE2_SIZE err_offset = 0;
        c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP, &err,
                                &err_offset, nullptr);
        if (!c->code) {
            throw std::runtime_error("pre-tokenizer regex '" + p + "': " + pcre2_message(err) + " at offset " +
                                     std::to_string(err_offset));
        }
        // Without JIT support pcre2_match interprets the pattern, slower but the same.
        pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
        compiled_.push_back(std::move(c));
    }
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
    thread_local JitStack jit;
    std::vector<std::string_view> pieces;
    if (text.empty()) return pieces;
    pieces.push_back(text);
    for (const auto& c : compiled_) {
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(c->code, nullptr);
        if (!md) throw std::bad_alloc();
        std::vector<std::string_view> next;
        next.reserve(pieces.size() * 2);
        for (std::string_view piece : pieces) {
            const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
            size_t pos = 0;       // where the next search starts
            size_t emitted = 0;   // end of the text already emitted
            while (pos < piece.size()) {
                const int rc = pcre2_match(c->code, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, md, jit.context);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    pcre2_match_data_free(md);
                    throw std::runtime_error("pre-tokenizer regex '" + c->pattern + "': " + pcre2_message(rc));
                }
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
                const size_t start = ov[0];
                const size_t end = ov[1];
                if (end == start) {
                    // An empty match cuts nothing; step over one code point.
                    pos = start + 1;
                    while (pos < piece.size() && (static_cast<uint8_t>(piece[pos]) & 0xC0) == 0x80) ++pos;
                    continue;
                }
                if (start > emitted) next.push_back(piece.substr(emitted, start - emitted));
                next.push_back(piece.substr(start, end - start));
                emitted = pos = end;
            }
            if (emitted < piece.size()) next.push_back(piece.substr(emitted));
        }
        pcre2_match_data_free(md);
        pieces = std::move(next);
    }
    return pieces;
}

}  // namespace deskside::models::tokenizer
