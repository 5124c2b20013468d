// Tool calls in model output. A chat template teaches the model one text format for calls
// (Hermes/Qwen `<tool_call>{json}</tool_call>`, Qwen3-Coder's XML inside `<tool_call>`
// (`<function=NAME>` with one `<parameter=KEY>` block per argument), Llama 3.x bare `{"name", "parameters"}` JSON,
// Mistral `[TOOL_CALLS][...]`); this file knows those formats: it turns generated text back into
// OpenAI tool_calls, whole or as a stream, and builds the grammar that makes the model write a
// call when tool_choice is "required" or names a function.
//
// Parsing rules, the same for a finished text and a stream (the stream's output never depends on
// how the text was chunked, and parse_tool_calls is the stream fed the whole text):
//   - a call is a JSON object with a "name" among the request's functions and its arguments
//     ("arguments" or "parameters": an object, or a string encoding one; absent means {});
//   - a call is sent as soon as it is certain: when its name is known and valid and its arguments
//     object opens (Qwen3-Coder: at <function=NAME>), its head (index, id, name) goes out, then
//     the arguments as the model writes them, with the whitespace between JSON tokens dropped
//     (the model's own text otherwise: numbers and escapes as written). The arguments are always
//     a prefix of valid JSON: each byte is checked as it arrives (server/json_scanner.h). A call
//     whose arguments come before its name, or are a string, is held until its object closes;
//   - text that fails before its call was sent (bad JSON, an unknown function, arguments that are
//     not an object, a text that ends first) stays content, byte for byte;
//   - a call that fails after it was sent stays a call, cut: its arguments are what was sent up to
//     the end of the text (max_tokens, a stop string) or the byte that broke the JSON, so they are
//     not complete JSON, as OpenAI's are under max_tokens. The finish reason is then the
//     engine's ("length", "stop"), never "tool_calls" (ToolCallStream::cut()). The rest of a
//     broken call is dropped up to its close marker (</tool_call>, ```); in formats without one
//     it is content again. In a list of calls (Mistral's), an item that is not a call ends the list
//     the same way once an earlier item was sent;
//   - Qwen3-Coder's XML calls are sent as {"KEY":VALUE,...} one parameter at a time, each value
//     typed by the function's schema (text, or JSON where the schema names another type);
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

#include "server/json_scanner.h"
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
    std::string arguments;  // a JSON object, serialized (a prefix of one when cut): OpenAI's function.arguments
};

// "call_" and 24 random alphanumerics; nine alphanumerics for Mistral, whose template rejects
// other ids when the call comes back in the history.
std::string new_tool_call_id(ToolFormat format);

// Qwen3-Coder's call markup: <function=NAME> then <parameter=KEY>\nVALUE\n</parameter> per argument,
// then </function>.
namespace qwen3_xml {
inline constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>";
inline constexpr std::string_view kParameter = "<parameter=", kParameterEnd = "</parameter>";
}  // namespace qwen3_xml

// One of: text outside calls, the start of a call, or the next piece of a call's arguments.
struct ToolCallEvent {
    std::string content;           // text outside calls
    std::optional<ToolCall> call;  // a call starts: its id and name (its arguments follow as pieces)
    std::string arguments;         // the next piece of call `index`'s arguments (never empty)
    size_t index = 0;              // the call's position among this answer's calls
    bool is_content() const { return !call && arguments.empty(); }
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
    // A call was sent whose arguments never completed (the text ended, or broke the JSON).
    bool cut() const { return cut_; }

   private:
    enum class State { kText, kBody, kAfterCall };
    // Inside a call's (or call list's) text: what is being read.
    enum class Body { kStart, kJson, kXmlName, kXmlParams, kXmlValue, kEnd, kRejected, kSkip };
    void run(bool final, std::vector<ToolCallEvent>& out);
    bool step_text(bool final, std::vector<ToolCallEvent>& out);
    bool step_body(bool final, std::vector<ToolCallEvent>& out);
    bool step_json(bool final, std::vector<ToolCallEvent>& out);
    bool step_xml(bool final, std::vector<ToolCallEvent>& out);
    bool step_after_call();
    void start_body(std::string_view marker, Markers tag);
    // The JSON body's structure, one byte at a time: `depth` and `in_string` are the scanner's
    // before the byte. False when the body failed on it.
    bool json_byte(char c, int depth, bool in_string, std::vector<ToolCallEvent>& out);
    void begin_call();
    bool end_call(std::vector<ToolCallEvent>& out);
    void send_call(std::string name, std::vector<ToolCallEvent>& out);
    void send_arguments(std::string_view piece, std::vector<ToolCallEvent>& out);
    // The body cannot go on at pos_: content again before any call was sent, else a cut call.
    void fail(std::vector<ToolCallEvent>& out);
    void end_body();
    void content(std::string text, std::vector<ToolCallEvent>& out);

    ToolFormat format_;
    const ToolsRequest& tools_;
    IdSource id_;
    State state_ = State::kText;
    std::string buf_;          // text not yet decided
    std::string held_space_;   // whitespace after content: dropped if a call follows
    bool at_start_ = true;     // nothing but whitespace so far: a bare call list may open the answer
    bool skip_space_ = false;  // just after a call: leading whitespace is dropped
    size_t n_calls_ = 0;
    bool cut_ = false;
    // kBody: the marker and text of the calls being read, verbatim (content again if rejected).
    std::string call_text_;
    size_t pos_ = 0;  // bytes of call_text_ read
    Markers tag_;     // the markers around it (close empty: it is one JSON value)
    Body body_ = Body::kStart;
    bool body_sent_ = false;  // a call of this body was sent: its text is no longer content
    JsonScanner json_;
    int call_depth_ = 1;  // the depth of a call's keys: 1 in an object body, 2 in a list
    // The call being read.
    enum class Field { kName, kArguments, kOther };
    Field field_ = Field::kOther;
    bool in_value_ = false;    // reading the value of a key at call_depth_
    std::string key_, value_;  // that key and value, without whitespace between tokens
    std::string name_;         // the valid name, once read
    std::optional<std::string> held_arguments_;
    bool sent_ = false;        // this call's head went out (or it is dropped: no parallel calls)
    bool dropped_ = false;
    bool arguments_done_ = false;
    size_t index_ = 0;
    const ToolFunction* function_ = nullptr;  // Qwen3-Coder: the function, for its parameter types
    std::string parameter_;                   // Qwen3-Coder: the parameter being read
    size_t n_parameters_ = 0;
};

struct ParsedToolCalls {
    std::string content;
    std::vector<ToolCall> calls;
    bool cut = false;  // ToolCallStream::cut()
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
