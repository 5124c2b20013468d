// A Hugging Face checkpoint directory seen as the GGUF file llama.cpp's convert_hf_to_gguf.py
// writes for it (with --outtype keeping each weight's dtype): hf_gguf_metadata's keys and the
// tensors in GGUF's conventions, so `deskside quantize HF_DIR` equals quantizing that file.
// Tensors are made one at a time, on request, so converting never holds more than one of them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/gguf.h"
#include "models/hf_checkpoint.h"
#include "models/model.h"

namespace deskside::models {

class HfAsGguf {
   public:
    // Reads the checkpoint (read_hf_checkpoint, with load_model's checks) and its converter metadata
    // (hf_gguf_metadata). Throws std::runtime_error naming the file and field or tensor it cannot convert.
    explicit HfAsGguf(const std::string& dir);

    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }

    // The converted model: hyper-parameters of its GGUF file (no rope_neox for llama, no
    // norm_weight_plus_one) and tensors with the converter's names, types and shapes. Their data
    // is the checkpoint's where it needs no change, else nullptr: take it from tensor().
    const ModelInfo& layout() const { return layout_; }

    // layout().tensors[i] with its bytes, made into `buf` where the checkpoint's need changing.
    Tensor tensor(size_t i, std::vector<uint8_t>& buf) const;

    // The mapped checkpoint tensors that tensor(i) is read from: one, the experts it stacks, or none
    // for a tensor made from config.json.
    std::vector<Tensor> sources(size_t i) const;

   private:
    // What the converter does to one tensor on the way.
    struct Plan {
        size_t source;          // index into the checkpoint's tensors
        int64_t permute_heads;  // > 0: LlamaModel.permute of the rows with this many heads
        bool plus_one;          // Gemma3Model's norm shift: w + 1
        // Qwen2MoeModel.modify_tensors: one checkpoint tensor per expert, each a slice of the
        // outermost dimension; GptOssModel: experts split from gate_up and repacked as MXFP4
        // (nullptr: the tensor is stored whole).
        const HfCheckpointParts::Stacked* parts;
    };

    HfCheckpointParts checkpoint_;
    ModelInfo layout_;
    std::vector<Plan> plans_;
    std::vector<std::pair<std::string, GgufValue>> metadata_;
};

}  // namespace deskside::models
