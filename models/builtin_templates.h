// Chat templates for models whose files carry none (a GGUF without tokenizer.chat_template, a
// Hugging Face directory without one in tokenizer_config.json), chosen by architecture so that
// `deskside chat` still speaks the turn format the family was trained on.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deskside::models {

struct BuiltinTemplate {
    std::string_view name;    // "gemma" or "plain", for messages
    std::string_view source;  // Jinja, rendered with ChatTemplate like a model's own template
    // Text that ends an assistant turn when the format has no end-of-turn token (the plain
    // format's next "User:" line); empty when the model's end-of-generation tokens suffice.
    std::vector<std::string> stop;
};

// Gemma's turn format for the gemma families, otherwise a plain "User: ...\nAssistant:" format.
BuiltinTemplate builtin_chat_template(std::string_view architecture);

}  // namespace deskside::models
