// What a checkpoint is, independent of where it came from.
//
// A GGUF file and a Hugging Face checkpoint directory both load into a ModelInfo: the
// architecture's hyperparameters, a tensor table in one naming scheme (GGUF's:
// "token_embd.weight", "blk.3.attn_q.weight", ...), tokenizer facts and the chat template. The
// engine only ever sees a ModelInfo, so it never cares which format a model was stored in.
//
// Shapes follow ggml's convention everywhere: shape[0] is the contiguous dimension. A weight
// matrix W of shape [n_in, n_out] holds n_out rows of n_in elements and computes y = W x.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quant/types.h"

namespace deskside::models {

enum class RopeScaling { None, Linear, Yarn, Llama3 };

struct Hparams {
    std::string architecture;  // a models::Family name (models/family.h), or whatever the file declares
    int64_t n_layer = 0;
    int64_t n_embd = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim = 0;  // key/query head size (not always n_embd / n_head, e.g. Gemma 3)
    int64_t head_dim_v = 0;
    int64_t n_ff = 0;
    // Families that vary these per layer list one value per layer here (the scalars above then
    // hold the largest); empty when uniform.
    std::vector<int64_t> n_head_layers, n_head_kv_layers, n_ff_layers;
    // Mixture of experts (0 = dense): experts per layer, experts each token uses, an expert's FFN size.
    int64_t n_expert = 0;
    int64_t n_expert_used = 0;
    int64_t n_ff_exp = 0;
    int64_t n_ctx_train = 0;
    int64_t n_vocab = 0;
    double norm_eps = 1e-5;  // RMS norm epsilon

    int64_t n_rot = 0;              // how many dimensions of a head RoPE rotates
    bool rope_neox = false;         // NEOX ordering (halves) instead of adjacent pairs
    double rope_freq_base = 10000;  // global layers
    double rope_freq_base_swa = 0;  // sliding-window layers, where they differ (Gemma 3); 0 = same
    RopeScaling rope_scaling = RopeScaling::None;
    double rope_scaling_factor = 1;
    int64_t rope_orig_ctx = 0;  // yarn / llama3: the context the model was trained with
    double rope_llama3_low_freq_factor = 1;
    double rope_llama3_high_freq_factor = 4;
    double rope_attn_factor = 1;  // multiplies RoPE's cos and sin (rope.scaling.attn_factor; LongRoPE)

    int64_t sliding_window = 0;          // 0 = none
    int64_t sliding_window_pattern = 0;  // every Nth layer is global (layer % N == N-1); 0 = all SWA when window > 0
    std::vector<bool> swa_layers;        // per-layer flags where the file lists them (overrides the pattern)
    bool tied_embeddings = false;        // output head reuses token_embd.weight
    // {arch}.pooling_type, llama.cpp's enum (0 none, 1 mean, 2 cls, 3 last, 4 rank); -1 absent.
    int64_t pooling_type = -1;
    // RMS norm weights w are applied as (1 + w). Gemma checkpoints from Hugging Face store w this
    // way; llama.cpp's converter adds the 1 when it writes GGUF, so GGUF files leave this false.
    bool norm_weight_plus_one = false;

    // Whether layer `il` attends through the sliding window.
    bool layer_is_swa(int64_t il) const;
};

struct TokenizerInfo {
    std::string kind;  // "llama" (SentencePiece), "gpt2" (byte-level BPE), "bert", "none", ...
    std::string pre;   // pre-tokenizer name for BPE (tokenizer.ggml.pre), empty if none
    int64_t n_vocab = 0;
    std::optional<int64_t> bos, eos, unk, pad, eot;
    bool add_bos = false;
    bool add_eos = false;
};

struct Tensor {
    std::string name;  // GGUF naming scheme
    quant::TypeId type = quant::TypeId::F32;
    std::vector<int64_t> shape;  // [contiguous, ...]
    // Points into a mapping owned by ModelInfo; nullptr in a description (describe_gguf of a header,
    // load_model of a checkpoint directory whose tensors are assembled at load).
    const uint8_t* data = nullptr;
    size_t n_bytes = 0;

    int64_t n_elements() const;
};

struct ModelInfo {
    std::string path;
    std::string format;      // "gguf" or "safetensors"
    uint64_t file_size = 0;  // bytes on disk, all files together
    Hparams hparams;
    TokenizerInfo tokenizer;
    std::optional<std::string> chat_template;
    std::vector<Tensor> tensors;
    std::shared_ptr<const void> storage;  // keeps the mappings that `tensors` point into alive

    const Tensor* find(const std::string& name) const;
    int64_t n_params() const;
    // Rows of token_embd.weight (0 without one): the token ids the model can embed are below it.
    // At load a vocabulary larger than this is refused (models/hparams_check.h).
    int64_t embedding_rows() const;
};

// Loads a GGUF file or a Hugging Face checkpoint directory. Throws std::runtime_error (GgufError,
// SafetensorsError, ...) naming the file and the field on anything malformed, hostile
// hyper-parameters included (models/hparams_check.h). A directory is described only
// (describe_hf_checkpoint): tensors it stores in parts (a mixture of experts' per-expert
// matrices) carry no data; open_model_file assembles them.
ModelInfo load_model(const std::string& path);

class GgufFile;
// The description of a parsed GGUF file, with load_model's hyper-parameter checks; `file` may be a
// header alone (GgufFile::parse_header), whose tensors then carry no data.
ModelInfo describe_gguf(std::shared_ptr<const GgufFile> file);

class Tokenizer;

// A model file opened and parsed once: its description and its tokenizer from the same parse (the
// GGUF's vocabulary, or a checkpoint directory's tokenizer files).
struct ModelFile {
    ModelInfo info;
    std::unique_ptr<Tokenizer> tokenizer;
    ModelFile();
    ModelFile(ModelFile&&) noexcept;
    ModelFile& operator=(ModelFile&&) noexcept;
    ~ModelFile();
};
ModelFile open_model_file(const std::string& path);

}  // namespace deskside::models
