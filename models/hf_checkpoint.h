// Hugging Face checkpoint directories: config.json + model.safetensors (or shards listed in
// model.safetensors.index.json), mapped onto the same ModelInfo as a GGUF file.
#pragma once

#include <string>

#include "models/model.h"

namespace deskside::models {

// Reads config.json (llama, mistral, qwen2, gemma3), maps every safetensors tensor (F32, F16,
// BF16) by reference into the mappings, renamed to GGUF's scheme with ggml-order shapes, and
// fills the tokenizer facts. Throws HfCheckpointError / SafetensorsError (std::runtime_error)
// naming the file, the field or tensor, and the byte offset where there is one.
ModelInfo load_hf_checkpoint(const std::string& dir);

struct HfConfig;
// The same with config.json already read into `config` (hf_config.h).
ModelInfo load_hf_checkpoint(const std::string& dir, const HfConfig& config);

}  // namespace deskside::models
