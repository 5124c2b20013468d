// The GGUF metadata llama.cpp's converter (convert_hf_to_gguf.py) writes for a Hugging Face
// checkpoint directory: general.* fields, the architecture's keys, the tokenizer (tokenizer.ggml.*
// arrays and ids) and the chat template from tokenizer_config.json. `deskside quantize HF_DIR`
// writes exactly these, in this order, before general.file_type and general.quantization_version.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/gguf.h"

namespace deskside::models {

// Throws std::runtime_error naming the file and field for a checkpoint it cannot describe.
std::vector<std::pair<std::string, GgufValue>> hf_gguf_metadata(const std::string& dir);

}  // namespace deskside::models
