#include "models/builtin_templates.h"

namespace deskside::models {
namespace {

// Google's official Gemma turn format, byte for byte the chat_template of google/gemma-2-2b-it
// (tokenizer_config.json; copy in llama.cpp's models/templates/google-gemma-2-2b-it.jinja, here
// /work/shared/templates/). Gemma 3's template writes the same bytes except that it folds a
// system message into the first user turn ("SYSTEM\n\nUSER"); this one raises on a system
// message, and `deskside chat` then folds it in the same way (see cli/cmd_chat.cpp).
constexpr std::string_view kGemma = R"tmpl({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %})tmpl";

// Fallback for architectures without a known format: a transcript the model continues after
// "Assistant:". Plain text has no end-of-turn token, so the caller stops at the next "User:".
constexpr std::string_view kPlain =
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\\n' }}"
    "{% else %}{{ 'Assistant: ' + message['content'] + '\\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";

}  // namespace

BuiltinTemplate builtin_chat_template(std::string_view architecture) {
    if (architecture.starts_with("gemma")) return {"gemma", kGemma, {}};
    return {"plain", kPlain, {"\nUser:"}};
}

}  // namespace deskside::models
