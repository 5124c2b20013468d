// Chat templates: the Jinja2 programs shipped with models (GGUF tokenizer.chat_template,
// tokenizer_config.json "chat_template") that turn a list of messages into the prompt text.
// We interpret them the way Hugging Face transformers' apply_chat_template does: jinja2's
// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols extension,
// {% generation %} rendered as its body, a tojson filter that is json.dumps without ASCII or
// HTML escaping, and raise_exception / strftime_now as globals. The output must be
// byte-identical to Python's, since the model was trained on exactly those bytes.
//
//   auto tmpl = ChatTemplate::parse(source);             // throws TemplateError (line/column)
//   std::string prompt = tmpl.render({{"messages", msgs}, {"add_generation_prompt", true},
//                                     {"bos_token", "<s>"}, {"eos_token", "</s>"}});
//
// Pass nlohmann::ordered_json where key order matters (tool schemas go through tojson in the
// order the client sent them, as Python's json.loads keeps it); plain nlohmann::json sorts keys.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace deskside::models {

class TemplateError : public std::runtime_error {
   public:
    enum class Kind {
        kSyntax,   // the template does not parse (message names line and column)
        kRaised,   // the template called raise_exception(message); what() is that message
        kRuntime,  // evaluation failed as it does in jinja2 (undefined attribute, TypeError, ...)
    };
    TemplateError(Kind kind, const std::string& message, std::string python_type = {})
        : std::runtime_error(message), kind_(kind), python_type_(std::move(python_type)) {}
    Kind kind() const { return kind_; }
    // The Python exception class jinja2 would raise ("TemplateSyntaxError", "UndefinedError",
    // "TypeError", ...), for diagnostics and tests.
    const std::string& python_type() const { return python_type_; }

   private:
    Kind kind_;
    std::string python_type_;
};

namespace jinja {
struct TemplateBody;
}

class ChatTemplate {
   public:
    // Parses a template; throws TemplateError(kSyntax) with "line L, column C: ..." on errors.
    static ChatTemplate parse(std::string source);
    // The template text as given (what a server reads the tool-call format from).
    const std::string& source() const { return source_; }

    // Renders with `context`'s top-level keys as template variables. raise_exception,
    // strftime_now, namespace, range and dict are provided as globals. strftime_now uses the
    // local time, or the date in the DESKSIDE_NOW environment variable (YYYY-MM-DD) if set.
    std::string render(const nlohmann::ordered_json& context) const;
    std::string render(const nlohmann::json& context) const;

    // The variables apply_chat_template passes: messages, tools (null for none),
    // documents=null, add_generation_prompt, bos_token, eos_token, then `extra` (e.g.
    // enable_thinking), which may override any of them.
    static nlohmann::ordered_json make_context(const nlohmann::ordered_json& messages,
                                               const nlohmann::ordered_json& tools,
                                               bool add_generation_prompt, const std::string& bos_token,
                                               const std::string& eos_token,
                                               const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

   private:
    std::shared_ptr<const jinja::TemplateBody> body_;
    std::string source_;
};

}  // namespace deskside::models
