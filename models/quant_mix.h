// llama-quantize's quantization mixes: which GGUF type each tensor of a model gets for a file type
// such as Q4_K_M, so that `deskside quantize` writes the files llama-quantize writes.
//
// A mix is a default type plus rules: 1-D tensors, norms and routers stay as they are; the output
// head (and a tied token embedding) gets Q6_K or Q8_0; attn_v and ffn_down get more bits in the
// first, last and every third layer of the _M mixes; models with 8 experts keep attn_k/attn_v in
// Q8_0; a row whose length does not divide into the type's blocks falls back to a 32-block type,
// and to F16 when even that does not divide.
// ref: llama.cpp src/llama-quant.cpp (llama_tensor_get_type, tensor_type_fallback,
//      tensor_allows_quantization) and tools/quantize/quantize.cpp (the names), as of
//      llama-cpp-python 0.3.36's vendored tree.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "quant/types.h"

namespace deskside::models {

struct QuantMix {
    std::string_view name;     // as llama-quantize spells it: "Q4_K_M"
    uint32_t file_type;        // llama.cpp's llama_ftype, written as general.file_type
    quant::TypeId base;        // the type most tensors get
};

// Every mix deskside writes (aliases included: Q4_K is Q4_K_M), in llama-quantize's listing order.
std::span<const QuantMix> quant_mixes();
// Case-insensitive; nullptr for a name that is not a mix.
const QuantMix* find_quant_mix(std::string_view name);
// "F32, F16, ..., IQ4_XS": for error messages and --help.
std::string quant_mix_names();

// The facts of a model the rules read (llama.cpp reads the same ones from the file's header).
struct MixModel {
    std::string architecture;  // general.architecture: "llama", "falcon", ...
    int64_t n_layer = 0;
    int64_t n_head = 0;     // layer 0's, where they vary per layer
    int64_t n_head_kv = 0;
    int64_t n_expert = 0;   // 0 for a dense model
};

struct MixTensor {
    std::string name;
    quant::TypeId type;          // as stored
    std::vector<int64_t> shape;  // ggml order: shape[0] is the row length
};

struct PlannedTensor {
    size_t source;       // index into the tensors given to plan_quant_mix
    quant::TypeId type;  // what it is written as
};

// The tensors in the order llama-quantize writes them (by layer, then by name; tensors outside a
// layer first) with the type each gets. `with_imatrix` changes a few rules (IQ4 ffn_down).
// Throws std::invalid_argument naming a tensor whose layer cannot be told from its name in a
// mixture-of-experts model.
std::vector<PlannedTensor> plan_quant_mix(const QuantMix& mix, const MixModel& model,
                                          std::span<const MixTensor> tensors, bool with_imatrix);

}  // namespace deskside::models
