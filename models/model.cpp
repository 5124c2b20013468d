#include "models/model.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "models/family.h"
#include "models/gguf.h"
#include "models/hf_checkpoint.h"
#include "models/hparams_check.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::models {

bool Hparams::layer_is_swa(int64_t il) const {
    if (sliding_window <= 0) return false;
    if (!swa_layers.empty()) return il >= 0 && il < static_cast<int64_t>(swa_layers.size()) && swa_layers[il];
    if (sliding_window_pattern <= 0) return true;
    return il % sliding_window_pattern != sliding_window_pattern - 1;
}

int64_t Tensor::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

const Tensor* ModelInfo::find(const std::string& name) const {
    for (const Tensor& t : tensors) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

int64_t ModelInfo::n_params() const {
    int64_t n = 0;
    for (const Tensor& t : tensors) n += t.n_elements();
    return n;
}

namespace {

std::optional<int64_t> optional_id(const GgufFile& f, const std::string& key) {
    if (!f.find(key)) return std::nullopt;
    const int64_t id = f.get_int(key, -1);
    // llama.cpp writes "no such token" as -1, often stored as u32 0xFFFFFFFF.
    if (id < 0 || id == 0xFFFFFFFFll) return std::nullopt;
    return id;
}

// A key that may be a scalar or an array with one entry per layer (head_count_kv and
// feed_forward_length are per-layer in some families). Returns the largest value and fills
// `per_layer` when the file gives one per layer.
int64_t layered_int(const GgufFile& f, const std::string& key, int64_t fallback, std::vector<int64_t>* per_layer) {
    const GgufValue* v = f.find(key);
    if (!v || v->type != GgufType::ARRAY) return f.get_int(key, fallback);
    try {
        int64_t largest = fallback;
        for (const GgufValue& item : v->as_array().items) {
            per_layer->push_back(item.as_int());
            largest = per_layer->size() == 1 ? per_layer->back() : std::max(largest, per_layer->back());
        }
        return largest;
    } catch (const GgufError& e) {
        throw GgufError(f.path() + ": metadata key '" + key + "': " + e.what());
    }
}

Hparams gguf_hparams(const GgufFile& f) {
    Hparams hp;
    hp.architecture = f.get_string("general.architecture");
    if (hp.architecture.empty()) return hp;  // vocab-only files
    const std::string a = hp.architecture + ".";
    hp.n_layer = f.get_int(a + "block_count", 0);
    hp.n_embd = f.get_int(a + "embedding_length", 0);
    hp.n_head = layered_int(f, a + "attention.head_count", 0, &hp.n_head_layers);
    hp.n_head_kv = layered_int(f, a + "attention.head_count_kv", hp.n_head, &hp.n_head_kv_layers);
    const int64_t default_head = hp.n_head > 0 ? hp.n_embd / hp.n_head : 0;
    hp.head_dim = f.get_int(a + "attention.key_length", default_head);
    hp.head_dim_v = f.get_int(a + "attention.value_length", hp.head_dim);
    hp.n_ff = layered_int(f, a + "feed_forward_length", 0, &hp.n_ff_layers);
    hp.n_ctx_train = f.get_int(a + "context_length", 0);
    hp.norm_eps = f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5);
    hp.n_rot = f.get_int(a + "rope.dimension_count", hp.head_dim);
    hp.rope_freq_base = f.get_float(a + "rope.freq_base", 10000.0);
    hp.rope_freq_base_swa = f.get_float(a + "rope.freq_base_swa", 0.0);

    const std::string scaling = f.get_string(a + "rope.scaling.type", "none");
    if (scaling == "linear")
        hp.rope_scaling = RopeScaling::Linear;
    else if (scaling == "yarn")
        hp.rope_scaling = RopeScaling::Yarn;
    else if (scaling == "llama3")
        hp.rope_scaling = RopeScaling::Llama3;
    hp.rope_scaling_factor = f.get_float(a + "rope.scaling.factor", 1.0);
    // Older files store the linear factor as rope.scale_linear.
    if (hp.rope_scaling == RopeScaling::None && f.find(a + "rope.scale_linear")) {
        hp.rope_scaling_factor = f.get_float(a + "rope.scale_linear", 1.0);
        if (hp.rope_scaling_factor != 1.0) hp.rope_scaling = RopeScaling::Linear;
    }
    hp.rope_orig_ctx = f.get_int(a + "rope.scaling.original_context_length", hp.n_ctx_train);

    hp.sliding_window = f.get_int(a + "attention.sliding_window", 0);
    if (const GgufValue* pattern = f.find(a + "attention.sliding_window_pattern");
        pattern && pattern->type == GgufType::ARRAY) {
        try {
            for (const GgufValue& item : pattern->as_array().items) hp.swa_layers.push_back(item.as_bool());
        } catch (const GgufError& e) {
            throw GgufError(f.path() + ": metadata key '" + a + "attention.sliding_window_pattern': " + e.what());
        }
    } else {
        hp.sliding_window_pattern = f.get_int(a + "attention.sliding_window_pattern", 0);
    }
    hp.rope_attn_factor = f.get_float(a + "rope.scaling.attn_factor", 1.0);
    hp.n_expert = f.get_int(a + "expert_count", 0);
    hp.n_expert_used = f.get_int(a + "expert_used_count", 0);
    hp.n_ff_exp = f.get_int(a + "expert_feed_forward_length", 0);
    hp.pooling_type = f.get_int(a + "pooling_type", -1);
    // The rest is the family's: its RoPE style, stated in its file, and what its files leave to
    // llama.cpp's defaults. An architecture no family describes keeps adjacent pairs (inspect
    // still shows it; loading it fails naming it).
    if (const Family* family = find_family(hp.architecture)) {
        hp.rope_neox = family->rope == RopeStyle::Neox;
        if (family->gguf_quirks) family->gguf_quirks(hp);
    }
    return hp;
}

TokenizerInfo gguf_tokenizer(const GgufFile& f) {
    TokenizerInfo t;
    t.kind = f.get_string("tokenizer.ggml.model", "none");
    t.pre = f.get_string("tokenizer.ggml.pre");
    if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens")) {
        try {
            t.n_vocab = static_cast<int64_t>(tokens->as_array().items.size());
        } catch (const GgufError& e) {
            throw GgufError(f.path() + ": metadata key 'tokenizer.ggml.tokens': " + e.what());
        }
    }
    t.bos = optional_id(f, "tokenizer.ggml.bos_token_id");
    t.eos = optional_id(f, "tokenizer.ggml.eos_token_id");
    t.unk = optional_id(f, "tokenizer.ggml.unknown_token_id");
    t.pad = optional_id(f, "tokenizer.ggml.padding_token_id");
    t.eot = optional_id(f, "tokenizer.ggml.eot_token_id");
    // SentencePiece vocabularies add BOS unless told otherwise; llama.cpp does the same.
    t.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", t.kind == "llama");
    t.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
    return t;
}

ModelInfo load_gguf(const std::string& path, std::shared_ptr<const GgufFile> file) {
    ModelInfo m;
    m.path = path;
    m.format = "gguf";
    m.file_size = file->file_size();
    m.hparams = gguf_hparams(*file);
    m.tokenizer = gguf_tokenizer(*file);
    if (file->find("tokenizer.chat_template")) m.chat_template = file->get_string("tokenizer.chat_template");
    for (const GgufTensorInfo& t : file->tensors()) {
        m.tensors.push_back(Tensor{t.name, t.type, t.shape, t.data, t.n_bytes});
    }
    if (const Tensor* emb = m.find("token_embd.weight"); emb && emb->shape.size() == 2) {
        m.hparams.n_vocab = emb->shape[1];
    } else {
        m.hparams.n_vocab = m.tokenizer.n_vocab;
    }
    m.hparams.tied_embeddings = !m.hparams.architecture.empty() && m.find("output.weight") == nullptr;
    m.storage = file;
    return m;
}

}  // namespace

int64_t ModelInfo::embedding_rows() const {
    const Tensor* emb = find("token_embd.weight");
    return emb && emb->shape.size() == 2 ? emb->shape[1] : 0;
}

ModelInfo load_model(const std::string& path) {
    std::error_code ec;
    ModelInfo info = std::filesystem::is_directory(path, ec)
                         ? describe_hf_checkpoint(path)
                         : load_gguf(path, std::make_shared<GgufFile>(GgufFile::open(path)));
    check_hparams(info, info.tokenizer.n_vocab);
    return info;
}

ModelInfo describe_gguf(std::shared_ptr<const GgufFile> file) {
    const std::string path = file->path();
    ModelInfo info = load_gguf(path, std::move(file));
    check_hparams(info, info.tokenizer.n_vocab);
    return info;
}

ModelFile::ModelFile() = default;
ModelFile::ModelFile(ModelFile&&) noexcept = default;
ModelFile& ModelFile::operator=(ModelFile&&) noexcept = default;
ModelFile::~ModelFile() = default;

ModelFile open_model_file(const std::string& path) {
    std::error_code ec;
    ModelFile out;
    if (std::filesystem::is_directory(path, ec)) {
        out.info = load_hf_checkpoint(path);
        out.tokenizer = Tokenizer::from_hf_dir(path);
    } else {
        auto file = std::make_shared<GgufFile>(GgufFile::open(path));
        out.tokenizer = Tokenizer::from_gguf(*file);
        out.info = load_gguf(path, std::move(file));
    }
    check_hparams(out.info,
                  std::max<int64_t>(out.info.tokenizer.n_vocab, out.tokenizer ? out.tokenizer->n_vocab() : 0));
    return out;
}

}  // namespace deskside::models
