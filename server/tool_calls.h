// Tool calls in model output. A chat template teaches the model one text format for calls
// (Hermes/Qwen `<tool_call>{json}</tool_call>`, Qwen3-Coder's XML inside `<tool_call>`
// (`<function=NAME>` with one `<parameter=KEY>` block per argument), Llama 3.x bare `{"name", "parameters"}` JSON,
// Mistral `[TOOL_CALLS][...]`); this file knows those formats: it turns generated text back into
// OpenAI tool_calls, whole or as a stream, and builds the grammar that makes the model write a
// call when tool_choice is "required" or names a function.
//
// Parsing rules, the same for a finished text and a stream (the stream's output never depends on
// how the text was chunked):
//   - a call is kept only when its JSON parses, is an object with a "name" among the request's
//     functions, and its arguments ("arguments" or "parameters": an object, or a string encoding
//     one; absent means {}) are an object; anything else stays content, byte for byte;
//   - whitespace between content and a call, or between calls, is dropped;
//   - without parallel_tool_calls, calls after the first are dropped (the client said it cannot
//     take them);
//   - a stream never shows content that might still turn out to be part of a call marker;
//   - in every format, a ```json fenced block holding a call is a call (models often write one).
// Llama's <|python_tag|> and Mistral's [TOOL_CALLS] are control tokens that the detokenizer does
// not print, so those families also take a call list that opens the answer without its marker.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai_request.h"

namespace deskside::engine {
class Grammar;
}

namespace deskside::server {

enum class ToolFormat { kHermes, kQwen3Xml, kLlama3, kMistral, kGeneric };

// --tool-parser names: hermes, qwen3_coder, llama3, mistral, generic.
std::optional<ToolFormat> tool_format_from_name(std::string_view name);
const char* tool_format_name(ToolFormat format);
// The format a chat template teaches, read from its source; kGeneric when none is recognised.
ToolFormat detect_tool_format(std::string_view template_source);

// How a family writes calls: begin, then calls joined by separator, then end, where one call is
// {"name": "NAME", "<arguments_key>": {...}}. With per_call, begin and end wrap every call instead.
struct ToolCallSyntax {
    std::string_view begin;
    std::string_view end;
    std::string_view separator;
    std::string_view arguments_key;
    bool per_call = false;
};
const ToolCallSyntax& tool_call_syntax(ToolFormat format);

struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // a JSON object, serialized: OpenAI's function.arguments
};

// "call_" and 24 random alphanumerics; nine alphanumerics for Mistral, whose template rejects
// other ids when the call comes back in the history.
std::string new_tool_call_id(ToolFormat format);

struct ToolCallEvent {
    std::string content;           // text outside calls (empty for a call)
    std::optional<ToolCall> call;  // a complete call
    size_t index = 0;              // the call's position among this answer's calls
};

// Incremental parser over one answer's text.
class ToolCallStream {
   public:
    // How calls open and close in the text the detokenizer gives us. `open` starts a call (or the
    // list of calls); `close`, when the format has one, ends it, else the call is one JSON value.
    // `bare` lists the characters that may open a call list at the very start of an answer.
    struct Markers {
        std::string_view open, close, bare;
    };
    using IdSource = std::function<std::string()>;
    // `id` makes call ids (default: new_tool_call_id(format)).
    ToolCallStream(ToolFormat format, const ToolsRequest& tools, IdSource id = {});
    std::vector<ToolCallEvent> feed(std::string_view text);
    // The end of the text: what is still held is decided (an unclosed call whose JSON is complete
    // counts; anything else is content).
    std::vector<ToolCallEvent> finish();
    size_t n_calls() const { return n_calls_; }

   private:
    enum class State { kText, kTagged, kJson, kAfterCall };
    void run(bool final, std::vector<ToolCallEvent>& out);
    bool step_text(bool final, std::vector<ToolCallEvent>& out);
    bool step_tagged(bool final, std::vector<ToolCallEvent>& out);
    bool step_json(bool final, std::vector<ToolCallEvent>& out);
    bool step_after_call();
    void start_json(std::string_view marker);
    void content(std::string text, std::vector<ToolCallEvent>& out);
    // Accepts `body` (a call object, or for list formats an array of them) as calls; false when
    // any of it is not a valid call, and nothing is emitted then.
    bool accept_calls(std::string_view body, std::vector<ToolCallEvent>& out);
    void reject(std::vector<ToolCallEvent>& out);

    ToolFormat format_;
    const ToolsRequest& tools_;
    IdSource id_;
    State state_ = State::kText;
    std::string buf_;          // text not yet decided
    std::string held_space_;   // whitespace after content: dropped if a call follows
    std::string call_text_;    // the marker and body of the call being read, verbatim
    Markers tag_;              // kTagged: the markers around the call being read
    bool at_start_ = true;     // nothing but whitespace so far: a bare call list may open the answer
    bool skip_space_ = false;  // just after a call: leading whitespace is dropped
    size_t n_calls_ = 0;
    // kJson: scanning one JSON value (from call_text_[body_start_]) for its end.
    size_t body_start_ = 0;
    int depth_ = 0;
    bool in_string_ = false, escaped_ = false;
};

struct ParsedToolCalls {
    std::string content;
    std::vector<ToolCall> calls;
};

// The whole text at once: a ToolCallStream fed everything.
ParsedToolCalls parse_tool_calls(std::string_view text, ToolFormat format, const ToolsRequest& tools,
                                 ToolCallStream::IdSource id = {});

// The grammar for tool_choice "required" (one call, or several with parallel_tool_calls, of any of
// the functions) or a named function (exactly one call of it): the format's envelope around
// {"name": ..., "<arguments_key>": <JSON valid against the function's parameters>}.
// Throws engine::SchemaError when a function's parameters cannot be enforced.
std::shared_ptr<const engine::Grammar> tool_call_grammar(const ToolsRequest& tools, ToolFormat format);

// Strict tools with tool_choice "auto": a lazy grammar (engine::JobSpec::grammar_trigger) that
// leaves the answer free until the model opens a call, then holds every call's arguments to its
// function's parameters (a non-strict function's that cannot be enforced: any object). Only for
// formats whose call marker is printed text (hermes, qwen3_coder); any other format is a 400 on
// `param`, as is a strict function whose parameters cannot be enforced.
struct LazyToolGrammar {
    std::shared_ptr<const engine::Grammar> grammar;
    std::string trigger;
};
bool has_strict_function(const ToolsRequest& tools);
LazyToolGrammar strict_tool_call_grammar(const ToolsRequest& tools, ToolFormat format, std::string_view param);

}  // namespace deskside::server
