// Quantizing a whole model with llama-quantize's per-tensor mixes: `deskside quantize` (streamed
// to a file, tensor by tensor) and `-m HF_DIR --quantize TYPE` (in memory, at load) both go
// through the same plan, so a model quantized at load computes what the quantized file computes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "models/model.h"

namespace deskside::models {

struct Imatrix;

struct QuantizeSpec {
    std::string type;                // llama-quantize's names: "Q4_K_M", "Q8_0", "F16", ...
    const Imatrix* imatrix = nullptr;  // weights the quantizers' error (llama-quantize --imatrix)
    std::string imatrix_path;        // written as quantize.imatrix.file, as llama-quantize does
    bool allow_requantize = false;   // inputs already quantized are dequantized and quantized again
    int threads = 0;                 // 0 = all hardware threads
};

// Quantizes every tensor of `in` in memory; the result owns its buffers. Throws
// std::invalid_argument naming an unknown type or a tensor it cannot quantize.
ModelInfo quantize_in_memory(const ModelInfo& in, const QuantizeSpec& spec);

// Called after each tensor with the input bytes done so far and in all.
using QuantizeProgress = std::function<void(uint64_t done, uint64_t total)>;

// Quantizes the GGUF file `in` into the GGUF file `out`, byte for byte what llama-quantize writes:
// the input's metadata in order, then general.quantization_version and general.file_type (and
// quantize.imatrix.* with an imatrix); tensors in llama-quantize's order. A checkpoint directory
// is first seen as the file convert_hf_to_gguf.py writes for it (models/hf_to_gguf.h). Streams
// tensor by tensor, so memory stays near one tensor's size; writes to a temporary name renamed at
// the end, so a failure leaves nothing behind. Throws
// std::invalid_argument for a request it refuses (unknown type, `out` naming the input, a
// quantized input without allow_requantize) and std::runtime_error for unreadable input.
void quantize_file(const std::string& in, const std::string& out, const QuantizeSpec& spec,
                   const QuantizeProgress& progress = {});

}  // namespace deskside::models
