// Hugging Face tensor names -> GGUF tensor names, per architecture.
//
// Each family's file (models/family_*.cpp, Family::hf_block) lists the names below
// "model.layers.N." in the order llama.cpp's converter writes them; arch_names.cpp adds the few
// global tensors and the multimodal wrappers' prefixes. Everything else in a
// checkpoint is either a known passenger that the text model does not use (rotary inv_freq
// buffers, Gemma 3's vision tower) or a name deskside does not know, which the loader reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace deskside::models {

struct HfTensorName {
    enum class Kind { Mapped, Ignored, Unknown };
    Kind kind = Kind::Unknown;
    std::string gguf;    // "blk.3.attn_q.weight" when Mapped
    int64_t layer = -1;  // block index, -1 for global tensors
    // A mixture-of-experts checkpoint stores each expert's projection separately ("mlp.experts.3.up_proj");
    // GGUF stacks them into one tensor (ffn_up_exps). `gguf` then names the stack, and this the part.
    int64_t expert = -1;
    // gpt-oss checkpoints store expert matrices in OpenAI's MXFP4 layout as two U8 tensors,
    // "<name>_blocks" and "<name>_scales"; `gguf` then names the one GGUF tensor both make.
    enum class Piece { Whole, Mxfp4Blocks, Mxfp4Scales };
    Piece piece = Piece::Whole;
    // Sorting by this key lists tensors as GGUF files do: token_embd, then each block in table
    // order (weight before bias), then output_norm and output.
    std::pair<int64_t, int> sort_key{0, 0};
};

// `architecture` is the GGUF name ("llama", "qwen2", "qwen3", "gemma3", ...). A family's block rule may
// hold "*" for a decimal expert index ("mlp.experts.*.gate_proj"). Names of a multimodal Gemma 3
// checkpoint ("language_model.model.layers.0...", "model.language_model.layers.0...") are
// accepted with their prefix. Besides ".weight" and ".bias", a block tensor may end in "_bias" (->
// .bias), "_blocks" / "_scales" (MXFP4 pieces of .weight), or in nothing (-> .weight: gpt-oss's
// "self_attn.sinks"), as convert_hf_to_gguf.py's GptOssModel names them; only rules match them.
HfTensorName map_hf_tensor_name(std::string_view architecture, std::string_view hf_name);

}  // namespace deskside::models
