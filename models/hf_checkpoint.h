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
    // A tensor GGUF stores whole, made from checkpoint tensors (assemble() below).
    struct Stacked {
        enum class Kind {
            Stack,  // parts in order (expert 0, 1, ...), each of the type and size of one slice
            // parts {blocks, scales}, U8 (typed I8 here) in OpenAI's MXFP4 layout ([..., rows, n_block, 16]
            // and [..., rows, n_block]), repacked into GGUF's MXFP4 blocks
            Mxfp4,
        };
        size_t tensor;              // index into info.tensors: [..., n_row, n_expert] in ggml order
        std::vector<Tensor> parts;  // mapped: one per expert, or one holding all experts
        Kind kind = Kind::Stack;
        // Row r of each expert's matrix is the parts' row r * step + offset (gpt-oss's gate_up_proj
        // holds gate in even rows and up in odd ones; 1, 0 elsewhere).
        int64_t step = 1, offset = 0;
        int64_t n_expert = 1, n_row = 1;
    };
    ModelInfo info;
    std::vector<Stacked> stacked;
    std::vector<size_t> made;  // indices into info.tensors of those made from config.json (in memory, not mapped)

    // How info.tensors[i] is made, or nullptr for a tensor stored whole.
    const Stacked* parts_of(size_t i) const;
};
HfCheckpointParts read_hf_checkpoint(const std::string& dir, const HfConfig& config);

// Writes the bytes of the tensor `s` describes (info.tensors[s.tensor].n_bytes) into `out`.
void assemble(const HfCheckpointParts::Stacked& s, uint8_t* out);

}  // namespace deskside::models
