// config.json of a Hugging Face checkpoint, read into the Hparams a GGUF file of the same model
// would give (same field meanings as models/model.cpp's GGUF path), for the transformers model
// types the families in models/family.h list (llama, mistral, qwen2, qwen3, qwen3_moe, phi3,
// gemma3_text and Gemma3ForConditionalGeneration's text_config); each family file holds its types'
// defaults and quirks.
//
// Fields a config leaves out take the defaults of the transformers config class of that family,
// since that is what the checkpoint was trained and saved with (Gemma 3 text_configs in
// particular list only what differs from Gemma3TextConfig).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/model.h"

namespace deskside::models {

// A tensor that llama.cpp's converter makes from config.json rather than reads from the weights
// (LongRoPE's rope_factors_short/long, from rope_scaling's short_factor/long_factor).
struct HfConfigTensor {
    std::string name;  // GGUF name
    std::vector<float> values;
};

struct HfConfig {
    std::string model_type;  // the transformers family: "llama", "mistral", "qwen2", "gemma3_text", "gemma3"
    bool multimodal =
        false;        // Gemma3ForConditionalGeneration: text weights sit under a prefix, vision weights beside them
    Hparams hparams;  // hparams.architecture in GGUF's naming
    bool tie_word_embeddings = false;
    // Special token ids as config.json states them (the first one where eos_token_id is a list).
    std::optional<int64_t> bos_token_id, eos_token_id, pad_token_id;
    // config.json's own fields, text_config's over the root's, without the family defaults: what
    // llama.cpp's converter reads (it writes a key only where the config states the field).
    nlohmann::json stated;
    std::vector<HfConfigTensor> config_tensors;  // in the order GGUF files list them
};

// `config` is config.json's content; `path` names it in errors. Throws HfCheckpointError naming
// the field for values of the wrong type or out of range, rope scaling types deskside does not
// implement (or the family does not run), and model types no family reads (naming model_type and architectures).
HfConfig parse_hf_config(const nlohmann::json& config, const std::string& path);

}  // namespace deskside::models
