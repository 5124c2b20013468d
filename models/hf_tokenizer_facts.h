// What a Hugging Face checkpoint says about its tokenizer, in the terms of TokenizerInfo: kind,
// vocabulary size, special token ids, add-BOS/EOS, and the chat template. This reads the facts
// only (from tokenizer.json, tokenizer_config.json, tokenizer.model, chat_template.jinja/.json);
// the tokenizer itself is built elsewhere from the same files.
#pragma once

#include <optional>
#include <string>

#include "models/hf_config.h"
#include "models/model.h"

namespace deskside::models {

struct HfTokenizerFacts {
    TokenizerInfo info;  // kind "none" when the directory holds no tokenizer files
    std::optional<std::string> chat_template;
};

// Throws HfCheckpointError naming the file and field when a tokenizer file is malformed or a
// special token it names is not in the vocabulary.
HfTokenizerFacts read_hf_tokenizer_facts(const std::string& dir, const HfConfig& config);

}  // namespace deskside::models
