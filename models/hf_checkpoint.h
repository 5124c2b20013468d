// Hugging Face checkpoint directories: config.json + model.safetensors (or shards listed in
// model.safetensors.index.json), mapped onto the same ModelInfo as a GGUF file.
#pragma once

#include <string>
#include <vector>

#include "models/model.h"

namespace deskside::models {

// Reads config.json (the model types of models/family.h's hf_types), maps every safetensors tensor
// (F32, F16, BF16) by reference into the mappings, renamed to GGUF's scheme with ggml-order shapes,
// and fills the tokenizer facts. Tensors GGUF stores whole but the checkpoint in parts (a mixture of
// experts' per-expert matrices) are stacked into memory the ModelInfo owns; those llama.cpp's
// converter makes from config.json (LongRoPE factors) too. Throws HfCheckpointError /
// SafetensorsError (std::runtime_error) naming the file, the field or tensor, and the byte offset
// where there is one.
ModelInfo load_hf_checkpoint(const std::string& dir);

struct HfConfig;
// The same with config.json already read into `config` (hf_config.h).
ModelInfo load_hf_checkpoint(const std::string& dir, const HfConfig& config);

// The checkpoint described without stacking anything: the tensors stored in parts carry no data
// (inspect, fits, the store: shapes and sizes only, whatever the experts' size).
ModelInfo describe_hf_checkpoint(const std::string& dir);

// A checkpoint before its parted tensors are stacked: `info` lists every GGUF tensor, and those
// the checkpoint stores in parts have no data there but their parts here, so a converter can
// assemble one at a time.
struct HfCheckpointParts {
    struct Stacked {
        size_t tensor;              // index into info.tensors; its shape's last dimension counts the parts
        std::vector<Tensor> parts;  // mapped, in order (expert 0, 1, ...), each of the type and size of one slice
    };
    ModelInfo info;
    std::vector<Stacked> stacked;
    std::vector<size_t> made;  // indices into info.tensors of those made from config.json (in memory, not mapped)

    // The parts of info.tensors[i], or nullptr for a tensor stored whole.
    const std::vector<Tensor>* parts_of(size_t i) const;
};
HfCheckpointParts read_hf_checkpoint(const std::string& dir, const HfConfig& config);

// Copies `parts` one after the other into `out` (their bytes together).
void stack_parts(const std::vector<Tensor>& parts, uint8_t* out);

}  // namespace deskside::models
