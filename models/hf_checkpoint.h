// Hugging Face checkpoint directories: config.json + model.safetensors (or shards listed in
// model.safetensors.index.json), mapped onto the same ModelInfo as a GGUF file.
#pragma once

#include <string>

#include "models/model.h"

namespace deskside::models {

// Throws std::runtime_error naming the file and the field on anything malformed or unsupported.
ModelInfo load_hf_checkpoint(const std::string& dir);

}  // namespace deskside::models
