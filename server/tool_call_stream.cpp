// ToolCallStream: an answer's tool calls read while it is generated, by the rules in tool_calls.h.
// Text is held only while it might still be a call marker or a call that was not yet sent; once a
// call's name and the opening of its arguments are read, the call goes out and its arguments
// follow byte by byte as the JSON scanner accepts them.
#include <algorithm>
#include <utility>

#include "server/tool_calls.h"

namespace deskside::server {
namespace {

using nlohmann::ordered_json;
using Markers = ToolCallStream::Markers;

constexpr std::string_view kSpace = " \t\r\n";
constexpr size_t kNone = std::string_view::npos;

Markers markers(ToolFormat f) {
    switch (f) {
        case ToolFormat::kHermes:
        case ToolFormat::kQwen3Xml: return {"<tool_call>", "</tool_call>", ""};
        case ToolFormat::kLlama3: return {"<|python_tag|>", "", "{"};
        case ToolFormat::kMistral: return {"[TOOL_CALLS]", "", "["};
        case ToolFormat::kGeneric: return {"", "", "{["};
    }
    return {};
}

// A call written as a fenced JSON block, in any format: models tuned on other syntaxes than their
// template's (the default model, Qwen2.5-Coder, among them) often answer with one. A fence whose
// body is not a call stays content, byte for byte.
constexpr Markers kFence{"```json", "```", ""};

// The longest proper prefix of `marker` that `text` ends with: bytes that must wait for more text.
size_t partial_marker(std::string_view text, std::string_view marker) {
    if (marker.empty()) return 0;
    for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k)
        if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
    return 0;
}

// Whether `rest` opens with `literal`: yes, not yet known (more text may complete it), or no.
enum class Match { kYes, kMaybe, kNo };
Match match(std::string_view rest, std::string_view literal, bool final) {
    if (rest.starts_with(literal)) return Match::kYes;
    return !final && literal.starts_with(rest) ? Match::kMaybe : Match::kNo;
}

std::string dump(const ordered_json& j) {
    return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// A Qwen3-Coder parameter's value. The markup carries no types: a value is text where the
// function's schema says string (or says nothing), and JSON where it names another type and the
// text parses.
ordered_json xml_parameter_value(std::string_view text, const ordered_json& parameters, const std::string& key) {
    if (text.starts_with('\n')) text.remove_prefix(1);
    if (text.ends_with('\n')) text.remove_suffix(1);
    const ordered_json* type = nullptr;
    if (parameters.is_object() && parameters.contains("properties") && parameters["properties"].contains(key) &&
        parameters["properties"][key].is_object() && parameters["properties"][key].contains("type"))
        type = &parameters["properties"][key]["type"];
    const bool text_only = !type || *type == "string" || (type->is_array() && type->size() == 1 && (*type)[0] == "string");
    if (!text_only) {
        try {
            return ordered_json::parse(text);
        } catch (const nlohmann::json::parse_error&) {
        }
    }
    return std::string(text);
}

}  // namespace

ToolCallStream::ToolCallStream(ToolFormat format, const ToolsRequest& tools, IdSource id)
    : format_(format), tools_(tools), id_(std::move(id)) {
    if (!id_) id_ = [format] { return new_tool_call_id(format); };
}

std::vector<ToolCallEvent> ToolCallStream::feed(std::string_view text) {
    std::vector<ToolCallEvent> out;
    buf_ += text;
    run(false, out);
    return out;
}

std::vector<ToolCallEvent> ToolCallStream::finish() {
    std::vector<ToolCallEvent> out;
    run(true, out);
    if (!held_space_.empty()) {  // trailing whitespace of the answer is content like any other
        if (!out.empty() && out.back().is_content()) {
            out.back().content += held_space_;
        } else {
            out.push_back({held_space_, std::nullopt, {}, 0});
        }
        held_space_.clear();
    }
    return out;
}

void ToolCallStream::run(bool final, std::vector<ToolCallEvent>& out) {
    for (;;) {
        bool progress = false;
        switch (state_) {
            case State::kText: progress = step_text(final, out); break;
            case State::kBody: progress = step_body(final, out); break;
            case State::kAfterCall: progress = step_after_call(); break;
        }
        if (!progress) return;
    }
}

void ToolCallStream::content(std::string text, std::vector<ToolCallEvent>& out) {
    if (text.empty()) return;
    text.insert(0, held_space_);
    held_space_.clear();
    const size_t last = text.find_last_not_of(kSpace);
    if (last == std::string::npos) {
        held_space_ = std::move(text);
        return;
    }
    held_space_ = text.substr(last + 1);
    text.resize(last + 1);
    at_start_ = false;
    if (!out.empty() && out.back().is_content()) {
        out.back().content += text;
    } else {
        out.push_back({std::move(text), std::nullopt, {}, 0});
    }
}

bool ToolCallStream::step_text(bool final, std::vector<ToolCallEvent>& out) {
    if (skip_space_) {
        const size_t b = buf_.find_first_not_of(kSpace);
        buf_.erase(0, b == std::string::npos ? buf_.size() : b);
        if (buf_.empty()) return false;
        skip_space_ = false;
    }
    if (buf_.empty()) return false;
    const Markers m = markers(format_);
    if (at_start_ && !m.bare.empty()) {
        const size_t i = buf_.find_first_not_of(kSpace);
        if (i == std::string::npos) {  // only whitespace yet: it is held either way
            content(std::exchange(buf_, {}), out);
            return false;
        }
        // Mistral's marker itself opens with '[': it is the marker, not a bare list, while it may be.
        const std::string_view rest = std::string_view(buf_).substr(i);
        const bool maybe_marker =
            !m.open.empty() && (rest.starts_with(m.open) || (!final && m.open.starts_with(rest)));
        if (!maybe_marker && m.bare.find(buf_[i]) != std::string_view::npos) {
            content(buf_.substr(0, i), out);
            buf_.erase(0, i);
            start_body("", Markers{});
            return true;
        }
    }
    // The earliest opening: the format's own marker, or a ```json fence.
    size_t pos = std::string::npos;
    Markers opened;
    for (const Markers& candidate : {m, kFence}) {
        if (candidate.open.empty() || (candidate.open == kFence.open && !tools_.fenced_calls)) continue;
        if (const size_t p = buf_.find(candidate.open); p < pos) {
            pos = p;
            opened = candidate;
        }
    }
    if (pos != std::string::npos) {
        content(buf_.substr(0, pos), out);
        buf_.erase(0, pos + opened.open.size());
        start_body(opened.open, opened);
        return true;
    }
    const size_t keep = final ? 0 : std::max(partial_marker(buf_, m.open), partial_marker(buf_, kFence.open));
    content(buf_.substr(0, buf_.size() - keep), out);
    buf_.erase(0, buf_.size() - keep);
    return false;
}

bool ToolCallStream::step_after_call() {
    // Llama writes several calls as JSON objects separated by ';'.
    const size_t b = buf_.find_first_not_of(kSpace);
    buf_.erase(0, b == std::string::npos ? buf_.size() : b);
    if (buf_.empty()) return false;
    if (buf_[0] == ';') {
        buf_.erase(0, 1);
        return true;
    }
    if (buf_[0] == '{') {
        start_body("", Markers{});
        return true;
    }
    state_ = State::kText;
    return true;
}

void ToolCallStream::start_body(std::string_view marker, Markers tag) {
    call_text_ = std::string(marker);
    pos_ = marker.size();
    tag_ = tag;
    body_ = Body::kStart;
    body_sent_ = false;
    state_ = State::kBody;
}

void ToolCallStream::end_body() {
    buf_.insert(0, call_text_.substr(pos_));
    call_text_.clear();
    pos_ = 0;
    state_ = format_ == ToolFormat::kLlama3 && tag_.close.empty() ? State::kAfterCall : State::kText;
    skip_space_ = true;
    at_start_ = false;
}

void ToolCallStream::fail(std::vector<ToolCallEvent>& out) {
    if (body_sent_) {
        if (sent_ && !dropped_ && !arguments_done_) cut_ = true;
        if (tag_.close.empty()) {
            end_body();  // what follows the break is text again
        } else {
            body_ = Body::kSkip;
        }
        return;
    }
    if (!tag_.close.empty()) {
        body_ = Body::kRejected;  // content through the close marker
        return;
    }
    content(call_text_.substr(0, pos_), out);
    buf_.insert(0, call_text_.substr(pos_));
    call_text_.clear();
    state_ = State::kText;
    at_start_ = false;  // a rejected bare value at the start is not retried
}

bool ToolCallStream::step_body(bool final, std::vector<ToolCallEvent>& out) {
    call_text_ += buf_;
    buf_.clear();
    const std::string_view text = call_text_;
    switch (body_) {
        case Body::kStart: {
            const size_t p = text.find_first_not_of(kSpace, pos_);
            if (p == kNone) {
                if (!final) return false;
                pos_ = text.size();
                fail(out);
                return true;
            }
            if (text[p] == '{' || text[p] == '[') {
                json_ = JsonScanner();
                call_depth_ = text[p] == '{' ? 1 : 2;
                body_ = Body::kJson;
                return true;
            }
            if (format_ == ToolFormat::kQwen3Xml && !tag_.close.empty()) {
                const Match m = match(text.substr(p), qwen3_xml::kFunction, final);
                if (m == Match::kMaybe) return false;
                if (m == Match::kYes) {
                    pos_ = p + qwen3_xml::kFunction.size();
                    body_ = Body::kXmlName;
                    return true;
                }
            }
            pos_ = p;
            fail(out);
            return true;
        }
        case Body::kJson: return step_json(final, out);
        case Body::kXmlName:
        case Body::kXmlParams:
        case Body::kXmlValue: return step_xml(final, out);
        case Body::kEnd: {
            const size_t p = std::min(text.find_first_not_of(kSpace, pos_), text.size());
            const Match m = match(text.substr(p), tag_.close, final);
            if (m == Match::kMaybe) return false;
            if (m == Match::kYes) {
                pos_ = p + tag_.close.size();
                end_body();
            } else {
                body_ = Body::kSkip;  // text inside the envelope after a sent call: dropped
            }
            return true;
        }
        case Body::kRejected:
        case Body::kSkip: {
            const size_t found = text.find(tag_.close, pos_);
            if (found == kNone && !final) {
                // The close marker may straddle this text and the next: keep its possible start.
                pos_ = std::max(pos_, text.size() - std::min(text.size(), tag_.close.size() - 1));
                return false;
            }
            pos_ = found == kNone ? text.size() : found + tag_.close.size();
            if (body_ == Body::kSkip) {
                end_body();
                return true;
            }
            content(call_text_.substr(0, pos_), out);
            buf_ = call_text_.substr(pos_);
            call_text_.clear();
            state_ = State::kText;
            at_start_ = false;
            return true;
        }
    }
    return false;
}

bool ToolCallStream::step_json(bool final, std::vector<ToolCallEvent>& out) {
    while (pos_ < call_text_.size()) {
        const char c = call_text_[pos_];
        const int depth = json_.depth();
        const bool in_string = json_.in_string();
        const JsonScanner::Step step = json_.push(c);
        if (step == JsonScanner::Step::kError) {
            fail(out);
            return true;
        }
        ++pos_;
        if (step == JsonScanner::Step::kSpace) continue;
        if (!json_byte(c, depth, in_string, out)) return true;
        if (step == JsonScanner::Step::kDone) {
            if (!body_sent_) {
                fail(out);  // a list without a call
            } else if (tag_.close.empty()) {
                end_body();
            } else {
                body_ = Body::kEnd;
            }
            return true;
        }
    }
    if (!final) return false;
    fail(out);  // the text ended inside the JSON
    return true;
}

bool ToolCallStream::json_byte(char c, int depth, bool in_string, std::vector<ToolCallEvent>& out) {
    if (depth < call_depth_) {  // the body's own brackets: a call's '{', or a list's '[', ',' and ']'
        if (c == '{' && depth == call_depth_ - 1) {
            begin_call();
            return true;
        }
        if (depth == 0 || c == ',' || c == ']') return true;
        fail(out);  // an item of the list that is not an object
        return false;
    }
    if (depth == call_depth_ && !in_string) {
        if (c == ':') {
            field_ = key_ == "\"name\"" ? Field::kName
                     : key_ == "\"arguments\"" || key_ == "\"parameters\"" ? Field::kArguments
                                                                            : Field::kOther;
            key_.clear();
            value_.clear();
            in_value_ = true;
            return true;
        }
        if (c == ',' || c == '}') {  // the end of a key's value, and for '}' of the call
            if (in_value_ && field_ == Field::kName && name_.empty()) {
                const ordered_json name = ordered_json::parse(value_, nullptr, false);
                if (name.is_string() && tools_.find(name.get<std::string>())) name_ = name.get<std::string>();
            }
            if (in_value_ && field_ == Field::kArguments) {
                if (sent_) {
                    arguments_done_ = true;
                } else if (!held_arguments_) {
                    held_arguments_ = value_;
                }
            }
            in_value_ = false;
            return c == ',' || end_call(out);
        }
    }
    if (!in_value_) {
        key_ += c;
        return true;
    }
    if (field_ == Field::kOther) return true;
    // The arguments object opens after a valid name: the call is certain enough to send.
    if (field_ == Field::kArguments && !sent_ && value_.empty() && c == '{' && !name_.empty()) send_call(name_, out);
    value_ += c;
    if (field_ == Field::kArguments && sent_ && !arguments_done_) {
        send_arguments(std::string_view(&c, 1), out);
        // The arguments are complete at their own '}', whatever follows in the call's object.
        if (c == '}' && !in_string && depth == call_depth_ + 1) arguments_done_ = true;
    }
    return true;
}

void ToolCallStream::begin_call() {
    field_ = Field::kOther;
    in_value_ = false;
    key_.clear();
    value_.clear();
    name_.clear();
    held_arguments_.reset();
    sent_ = dropped_ = arguments_done_ = false;
    function_ = nullptr;
    n_parameters_ = 0;
}

bool ToolCallStream::end_call(std::vector<ToolCallEvent>& out) {
    if (sent_) return true;
    // Held to here: arguments before the name, or encoded as a string, or absent.
    std::string arguments = "{}";
    if (held_arguments_) {
        arguments.clear();
        if (held_arguments_->starts_with('{')) {
            arguments = *held_arguments_;  // complete, checked and compacted by the scanner
        } else {
            const ordered_json encoded = ordered_json::parse(*held_arguments_, nullptr, false);
            if (encoded.is_string()) arguments = compact_json_object(encoded.get<std::string>());
        }
    }
    if (name_.empty() || arguments.empty()) {
        fail(out);
        return false;
    }
    send_call(name_, out);
    arguments_done_ = true;
    send_arguments(arguments, out);
    return true;
}

void ToolCallStream::send_call(std::string name, std::vector<ToolCallEvent>& out) {
    sent_ = body_sent_ = true;
    if (!tools_.parallel && n_calls_ > 0) {
        dropped_ = true;
        return;
    }
    held_space_.clear();
    at_start_ = false;
    index_ = n_calls_++;
    out.push_back({{}, ToolCall{id_(), std::move(name), {}}, {}, index_});
}

void ToolCallStream::send_arguments(std::string_view piece, std::vector<ToolCallEvent>& out) {
    if (dropped_ || piece.empty()) return;
    if (!out.empty() && !out.back().arguments.empty() && out.back().index == index_) {
        out.back().arguments += piece;
    } else {
        out.push_back({{}, std::nullopt, std::string(piece), index_});
    }
}

bool ToolCallStream::step_xml(bool final, std::vector<ToolCallEvent>& out) {
    using namespace qwen3_xml;
    const std::string_view text = call_text_;
    switch (body_) {
        case Body::kXmlName: {
            const size_t gt = text.find('>', pos_);
            if (gt == kNone && !final) return false;
            const ToolFunction* f = gt == kNone ? nullptr : tools_.find(std::string(text.substr(pos_, gt - pos_)));
            if (!f) {
                fail(out);
                return true;
            }
            pos_ = gt + 1;
            begin_call();
            function_ = f;
            send_call(f->name, out);
            send_arguments("{", out);
            body_ = Body::kXmlParams;
            return true;
        }
        case Body::kXmlParams: {
            const size_t p = std::min(text.find_first_not_of(kSpace, pos_), text.size());
            const Match end = match(text.substr(p), kFunctionEnd, final);
            const Match parameter = match(text.substr(p), kParameter, final);
            if (end == Match::kYes) {
                pos_ = p + kFunctionEnd.size();
                send_arguments("}", out);
                arguments_done_ = true;
                body_ = Body::kEnd;
                return true;
            }
            const size_t gt = parameter == Match::kYes ? text.find('>', p) : kNone;
            if (gt != kNone) {
                parameter_ = std::string(text.substr(p + kParameter.size(), gt - p - kParameter.size()));
                pos_ = gt + 1;
                body_ = Body::kXmlValue;
                return true;
            }
            if (!final && (end == Match::kMaybe || parameter != Match::kNo)) return false;
            pos_ = p;
            fail(out);
            return true;
        }
        case Body::kXmlValue: {
            const size_t end = text.find(kParameterEnd, pos_);
            const size_t close = text.find(tag_.close, pos_);
            if (end == kNone || close < end) {
                if (close == kNone && !final) return false;
                fail(out);  // the call closed (or the text ended) inside a value
                return true;
            }
            const ordered_json value =
                xml_parameter_value(text.substr(pos_, end - pos_), function_->parameters, parameter_);
            send_arguments((n_parameters_++ > 0 ? "," : "") + dump(ordered_json(parameter_)) + ":" + dump(value), out);
            pos_ = end + kParameterEnd.size();
            body_ = Body::kXmlParams;
            return true;
        }
        default: return false;
    }
}

ParsedToolCalls parse_tool_calls(std::string_view text, ToolFormat format, const ToolsRequest& tools,
                                 ToolCallStream::IdSource id) {
    ToolCallStream stream(format, tools, std::move(id));
    std::vector<ToolCallEvent> events = stream.feed(text);
    for (ToolCallEvent& e : stream.finish()) events.push_back(std::move(e));
    ParsedToolCalls parsed;
    for (ToolCallEvent& e : events) {
        if (e.call) {
            parsed.calls.push_back(std::move(*e.call));
        } else if (!e.arguments.empty()) {
            parsed.calls[e.index].arguments += e.arguments;
        } else {
            parsed.content += e.content;
        }
    }
    parsed.cut = stream.cut();
    return parsed;
}

}  // namespace deskside::server
