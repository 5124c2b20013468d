// A Hugging Face checkpoint directory -> ModelInfo: config.json gives the hyperparameters
// (hf_config.cpp), the safetensors files give the tensors, renamed to GGUF's scheme
// (arch_names.cpp) with shapes reversed to ggml order, and the tokenizer files give the
// tokenizer facts (hf_tokenizer_facts.cpp). Tensor data stays in the mappings, except where GGUF
// holds in one tensor what the checkpoint stores in several (a mixture of experts' per-expert
// matrices, stacked at load) or none (LongRoPE factors, made from config.json).
//
// Numeric conventions that differ from a GGUF file of the same model are recorded in Hparams
// rather than fixed up by copying weights: Q/K of llama-family checkpoints are not permuted
// (hence rope_neox), and Gemma's norm weights are stored as w for (1 + w) (norm_weight_plus_one).
#include "models/hf_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "models/arch_names.h"
#include "models/hf_config.h"
#include "models/hf_json.h"
#include "models/hf_tokenizer_facts.h"
#include "models/safetensors.h"

namespace deskside::models {

namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr size_t kMaxRank = 4;  // ggml tensors have at most four dimensions
// The sort group of tensors made from config.json: before token_embd's (-1), as GGUF files list them.
constexpr int64_t kConfigTensors = -2;

// A shard named by the index must be a file in the checkpoint directory itself.
bool plain_file_name(const std::string& s) {
    return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\\') == std::string::npos;
}

// Opens model.safetensors, or every shard that model.safetensors.index.json lists, and checks
// that the index and the shards agree tensor by tensor.
std::vector<SafetensorsFile> open_safetensors(const fs::path& dir) {
    std::vector<SafetensorsFile> files;
    if (fs::is_regular_file(dir / kSingleFile)) {
        files.push_back(SafetensorsFile::open((dir / kSingleFile).string()));
        return files;
    }
    const std::string index_path = (dir / kIndexFile).string();
    if (!fs::is_regular_file(index_path)) {
        throw HfCheckpointError(dir.string() + ": no " + kSingleFile + " or " + kIndexFile +
                                " (deskside reads Hugging Face checkpoints stored as safetensors)");
    }
    const nlohmann::json index = read_json_file(index_path);
    const JsonFields root(index, index_path);
    const auto weight_map = root.opt_object("weight_map");
    if (!weight_map) root.fail("weight_map", "missing");

    std::map<std::string, size_t> shard_of_file;    // shard file name -> position in `files`
    std::map<std::string, size_t> shard_of_tensor;  // tensor name -> position in `files`
    for (const auto& [tensor, file] : index.at("weight_map").items()) {
        if (!file.is_string()) weight_map->fail(tensor, "expected a shard file name, found " + file.dump());
        const std::string name = file.get<std::string>();
        if (!plain_file_name(name))
            weight_map->fail(tensor, "shard '" + name + "' is not a file name inside the checkpoint directory");
        auto [it, added] = shard_of_file.emplace(name, files.size());
        if (added) {
            const fs::path shard = dir / name;
            if (!fs::is_regular_file(shard))
                weight_map->fail(tensor, "shard '" + name + "' does not exist in " + dir.string());
            files.push_back(SafetensorsFile::open(shard.string()));
        }
        if (!files[it->second].find(tensor)) weight_map->fail(tensor, "tensor is missing from shard '" + name + "'");
        shard_of_tensor.emplace(tensor, it->second);
    }
    if (files.empty()) root.fail("weight_map", "lists no tensors");
    for (size_t k = 0; k < files.size(); ++k) {
        for (const SafetensorsTensor& t : files[k].tensors()) {
            auto it = shard_of_tensor.find(t.name);
            if (it == shard_of_tensor.end() || it->second != k) {
                throw HfCheckpointError(
                    files[k].path() + ": tensor '" + t.name + "' " +
                    (it == shard_of_tensor.end() ? "is not listed in " : "is listed under another shard in ") +
                    kIndexFile);
            }
        }
    }
    return files;
}

std::optional<quant::TypeId> tensor_type(SafetensorsDtype d) {
    switch (d) {
        case SafetensorsDtype::F32:
            return quant::TypeId::F32;
        case SafetensorsDtype::F16:
            return quant::TypeId::F16;
        case SafetensorsDtype::BF16:
            return quant::TypeId::BF16;
        default:
            return std::nullopt;
    }
}

struct MappedTensor {
    Tensor tensor;
    std::pair<int64_t, int> sort_key;
    std::string hf_name;
    std::vector<Tensor> parts;  // an assembled tensor's (HfCheckpointParts::Stacked); empty for one stored whole
    HfCheckpointParts::Stacked recipe{};
};

using Stacked = HfCheckpointParts::Stacked;

// gpt-oss's fused expert tensors: rows alternate between the two GGUF tensors (GptOssModel splits
// gate_up_proj with [:, ::2] and [:, 1::2]).
struct Interleaved {
    std::string_view fused, even, odd;
};
constexpr Interleaved kInterleaved[] = {{"ffn_gate_up_exps", "ffn_gate_exps", "ffn_up_exps"}};

const Interleaved* interleaved(const std::string& gguf) {
    for (const Interleaved& i : kInterleaved)
        if (gguf.find(i.fused) != std::string::npos) return &i;
    return nullptr;
}

std::string renamed(std::string gguf, std::string_view from, std::string_view to) {
    return gguf.replace(gguf.find(from), from.size(), to);
}

// What a checkpoint's ModelInfo keeps alive: the mapped files and the floats made from config.json.
struct MappedStorage {
    std::shared_ptr<const std::vector<SafetensorsFile>> files;
    std::vector<std::vector<float>> config_floats;
};

// A loaded checkpoint's: the above, and the stacked tensors' bytes.
struct LoadedStorage {
    std::shared_ptr<const void> mapped;
    std::vector<std::vector<uint8_t>> stacked;
};

MappedTensor map_tensor(const SafetensorsFile& file, const SafetensorsTensor& st, const HfTensorName& name,
                        const HfConfig& cfg) {
    const bool piece = name.piece != HfTensorName::Piece::Whole;
    const std::string where = file.path() + ": tensor '" + st.name + "' (data at byte offset " +
                              std::to_string(file.data_offset() + st.begin) + ")";
    if (name.layer >= cfg.hparams.n_layer) {
        throw HfCheckpointError(where + ": belongs to layer " + std::to_string(name.layer) + ", but config.json has " +
                                std::to_string(cfg.hparams.n_layer) + " layers (num_hidden_layers)");
    }
    if (piece != (st.dtype == SafetensorsDtype::U8)) {
        throw HfCheckpointError(where + ": dtype " + std::string(safetensors_dtype_name(st.dtype)) +
                                (piece ? ", but MXFP4 blocks and scales are U8" : " is not supported here"));
    }
    const auto type = piece ? std::optional(quant::TypeId::I8) : tensor_type(st.dtype);
    if (!type) {
        throw HfCheckpointError(where + ": dtype " + std::string(safetensors_dtype_name(st.dtype)) +
                                " is not supported (deskside reads F32, F16 and BF16 checkpoints)");
    }
    if (st.shape.empty() || st.shape.size() > kMaxRank)
        throw HfCheckpointError(where + ": rank " + std::to_string(st.shape.size()) + " is outside 1..4");
    // safetensors shapes are row-major [out, in]; ggml order lists the contiguous dimension first.
    std::vector<int64_t> shape(st.shape.rbegin(), st.shape.rend());
    return MappedTensor{Tensor{name.gguf, *type, std::move(shape), st.data, st.n_bytes()}, name.sort_key, st.name, {}};
}

// token_embd.weight (and output.weight when present) must be [n_embd, n_vocab].
void check_vocab_tensor(const ModelInfo& m, const std::string& gguf, const std::string& hf_name) {
    const Tensor* t = m.find(gguf);
    const Hparams& hp = m.hparams;
    if (!t) {
        if (gguf == "output.weight") return;
        throw HfCheckpointError(m.path + ": the checkpoint has no " + hf_name + " (" + gguf + ")");
    }
    if (t->shape.size() != 2 || t->shape[0] != hp.n_embd || t->shape[1] != hp.n_vocab) {
        std::string shape;
        for (auto it = t->shape.rbegin(); it != t->shape.rend(); ++it)
            shape += (shape.empty() ? "" : ", ") + std::to_string(*it);
        throw HfCheckpointError(m.path + ": tensor " + hf_name + " has shape [" + shape +
                                "], but config.json says [vocab_size, hidden_size] = [" + std::to_string(hp.n_vocab) +
                                ", " + std::to_string(hp.n_embd) + "]");
    }
}

std::string shape_text(const std::vector<int64_t>& ggml_shape) {
    std::string out;
    for (auto it = ggml_shape.rbegin(); it != ggml_shape.rend(); ++it)
        out += (out.empty() ? "" : ", ") + std::to_string(*it);
    return "[" + out + "]";
}

// One GGUF tensor from the checkpoint's per-expert tensors (parts[e] = expert e's matrix, parts
// sized n_expert): all of them, of one type and shape, stacked along a new outermost dimension.
MappedTensor stack_experts(const std::string& gguf, std::vector<MappedTensor> parts, const HfConfig& cfg,
                           const std::string& dir) {
    const int64_t n_expert = cfg.hparams.n_expert;
    const MappedTensor* first = nullptr;
    for (size_t e = 0; e < parts.size(); ++e) {
        const MappedTensor& p = parts[e];
        if (p.tensor.data == nullptr) continue;
        if (!first) first = &p;
        if (p.tensor.type != first->tensor.type || p.tensor.shape != first->tensor.shape) {
            throw HfCheckpointError(dir + ": tensor '" + p.hf_name + "' (" + shape_text(p.tensor.shape) +
                                    ") differs in shape or dtype from '" + first->hf_name + "' (" +
                                    shape_text(first->tensor.shape) + "), another expert of the same layer");
        }
    }
    for (int64_t e = 0; e < n_expert; ++e) {
        if (parts[static_cast<size_t>(e)].tensor.data == nullptr)
            throw HfCheckpointError(dir + ": the checkpoint has no expert " + std::to_string(e) + " for " + gguf +
                                    " (" + std::to_string(n_expert) + " experts in config.json, num_experts)");
    }
    MappedTensor out{first->tensor, first->sort_key, first->hf_name, {}};
    out.tensor.name = gguf;
    out.tensor.shape.push_back(n_expert);
    out.tensor.data = nullptr;
    out.tensor.n_bytes = first->tensor.n_bytes * static_cast<size_t>(n_expert);
    for (MappedTensor& p : parts) out.parts.push_back(std::move(p.tensor));
    out.recipe = {0, {}, Stacked::Kind::Stack, 1, 0, n_expert, out.tensor.shape[out.tensor.shape.size() - 2]};
    return out;
}

// One 32-value block from OpenAI's MXFP4 layout (16 bytes, byte i holding values 2i (low nibble)
// and 2i + 1 (high)) into GGUF's (byte j holding values j (low) and j + 16 (high)); the E8M0 scale
// byte is the same in both and goes first in GGUF's block.
// ref: transformers integrations/mxfp4.py (_convert_moe_packed_tensors); gguf-py quants.py (MXFP4)
void repack_mxfp4_block(uint8_t scale, const uint8_t* openai, uint8_t* gguf) {
    const auto value = [&](int v) { return (openai[v / 2] >> (4 * (v % 2))) & 0xF; };
    gguf[0] = scale;
    for (int j = 0; j < 16; ++j) gguf[1 + j] = static_cast<uint8_t>(value(j) | value(j + 16) << 4);
}

// Whether each part holds every expert (MXFP4's blocks and scales, a fused bias), not one expert each.
bool all_experts(const Stacked& s) {
    return s.kind == Stacked::Kind::Mxfp4 || s.parts.size() == 1;
}

// The row bytes of one part: it holds n_row * step rows per expert.
size_t source_row_bytes(const Stacked& s, const Tensor& part) {
    const size_t rows = static_cast<size_t>(s.n_row * s.step * (all_experts(s) ? s.n_expert : 1));
    return part.n_bytes / rows;
}

// Row `r` of expert `e` of the parts seen as [n_expert, n_row * step, ...].
const uint8_t* source_row(const Stacked& s, const Tensor& part, size_t row_bytes, int64_t e, int64_t r) {
    const int64_t rows = s.n_row * s.step;
    const int64_t in_part = (all_experts(s) ? e * rows : 0) + r * s.step + s.offset;
    return part.data + static_cast<size_t>(in_part) * row_bytes;
}

}  // namespace

const HfCheckpointParts::Stacked* HfCheckpointParts::parts_of(size_t i) const {
    for (const Stacked& s : stacked)
        if (s.tensor == i) return &s;
    return nullptr;
}

void assemble(const Stacked& s, uint8_t* out) {
    if (s.kind == Stacked::Kind::Stack) {
        for (int64_t e = 0; e < s.n_expert; ++e) {
            const Tensor& part = all_experts(s) ? s.parts[0] : s.parts[static_cast<size_t>(e)];
            const size_t row_bytes = source_row_bytes(s, part);
            for (int64_t r = 0; r < s.n_row; ++r, out += row_bytes)
                std::memcpy(out, source_row(s, part, row_bytes, e, r), row_bytes);
        }
        return;
    }
    const Tensor &blocks = s.parts[0], &scales = s.parts[1];
    const size_t block_row = source_row_bytes(s, blocks), scale_row = source_row_bytes(s, scales);
    for (int64_t e = 0; e < s.n_expert; ++e) {
        for (int64_t r = 0; r < s.n_row; ++r) {
            const uint8_t* b = source_row(s, blocks, block_row, e, r);
            const uint8_t* sc = source_row(s, scales, scale_row, e, r);
            for (size_t k = 0; k < scale_row; ++k, out += 17) repack_mxfp4_block(sc[k], b + 16 * k, out);
        }
    }
}

namespace {

// A gpt-oss expert tensor GGUF stores as MXFP4, from its "_blocks" and "_scales" tensors (either
// may be missing: refused). `split` selects even or odd rows of an interleaved pair.
MappedTensor mxfp4_tensor(const std::string& gguf, MappedTensor* blocks, MappedTensor* scales, int64_t step,
                          int64_t offset, const HfConfig& cfg, const std::string& dir) {
    if (!blocks || !scales) {
        throw HfCheckpointError(dir + ": tensor '" + (blocks ? blocks->hf_name : scales->hf_name) + "' has no " +
                                (blocks ? "_scales" : "_blocks") + " tensor beside it (MXFP4 needs both)");
    }
    const std::vector<int64_t>&bs = blocks->tensor.shape, &ss = scales->tensor.shape;  // ggml order
    const int64_t n_expert = cfg.hparams.n_expert;
    if (bs.size() != 4 || bs[0] != 16 || ss.size() != 3 || !std::equal(ss.begin(), ss.end(), bs.begin() + 1) ||
        bs[3] != n_expert || bs[2] % step != 0) {
        throw HfCheckpointError(dir + ": " + blocks->hf_name + " " + shape_text(bs) + " and " + scales->hf_name + " " +
                                shape_text(ss) + " are not MXFP4 experts [" + std::to_string(n_expert) +
                                ", rows, blocks, 16] and [" + std::to_string(n_expert) + ", rows, blocks]");
    }
    MappedTensor out{blocks->tensor, blocks->sort_key, blocks->hf_name, {blocks->tensor, scales->tensor}, {}};
    out.tensor.name = gguf;
    out.tensor.type = quant::TypeId::MXFP4;
    out.tensor.shape = {bs[1] * 32, bs[2] / step, n_expert};
    out.tensor.data = nullptr;
    out.tensor.n_bytes = quant::row_bytes(quant::TypeId::MXFP4, out.tensor.n_elements());
    out.recipe = {0, {}, Stacked::Kind::Mxfp4, step, offset, n_expert, bs[2] / step};
    return out;
}

// Even or odd rows of a fused tensor stored whole ([n_expert, 2 * rows, ...]; gpt-oss's gate_up_proj_bias).
MappedTensor rows_of(const MappedTensor& fused, const std::string& gguf, int64_t offset, const HfConfig& cfg,
                     const std::string& dir) {
    const std::vector<int64_t>& shape = fused.tensor.shape;
    if (shape.size() < 2 || shape.back() != cfg.hparams.n_expert || shape[shape.size() - 2] % 2 != 0) {
        throw HfCheckpointError(dir + ": tensor '" + fused.hf_name + "' " + shape_text(shape) + " is not [" +
                                std::to_string(cfg.hparams.n_expert) +
                                ", 2 * rows, ...] (gate and up rows interleaved)");
    }
    MappedTensor out{fused.tensor, fused.sort_key, fused.hf_name, {fused.tensor}, {}};
    out.tensor.name = gguf;
    out.tensor.shape[shape.size() - 2] /= 2;
    out.tensor.data = nullptr;
    out.tensor.n_bytes /= 2;
    out.recipe = {0, {}, Stacked::Kind::Stack, 2, offset, shape.back(), out.tensor.shape[shape.size() - 2]};
    return out;
}

HfConfig read_config(const std::string& dir) {
    const std::string config_path = (fs::path(dir) / "config.json").string();
    if (!fs::is_regular_file(config_path))
        throw HfCheckpointError(dir + ": no config.json (not a Hugging Face checkpoint directory)");
    return parse_hf_config(read_json_file(config_path), config_path);
}

}  // namespace

ModelInfo load_hf_checkpoint(const std::string& dir) {
    return load_hf_checkpoint(dir, read_config(dir));
}

ModelInfo describe_hf_checkpoint(const std::string& dir) {
    return read_hf_checkpoint(dir, read_config(dir)).info;
}

ModelInfo load_hf_checkpoint(const std::string& dir, const HfConfig& cfg) {
    HfCheckpointParts checkpoint = read_hf_checkpoint(dir, cfg);
    if (checkpoint.stacked.empty()) return std::move(checkpoint.info);
    auto storage = std::make_shared<LoadedStorage>();
    storage->mapped = checkpoint.info.storage;
    for (const HfCheckpointParts::Stacked& s : checkpoint.stacked) {
        Tensor& t = checkpoint.info.tensors[s.tensor];
        std::vector<uint8_t>& bytes = storage->stacked.emplace_back(t.n_bytes);
        assemble(s, bytes.data());
        t.data = bytes.data();
    }
    checkpoint.info.storage = std::move(storage);
    return std::move(checkpoint.info);
}

HfCheckpointParts read_hf_checkpoint(const std::string& dir, const HfConfig& cfg) {
    const fs::path d(dir);
    auto storage = std::make_shared<MappedStorage>();
    storage->files = std::make_shared<const std::vector<SafetensorsFile>>(open_safetensors(d));
    const std::vector<SafetensorsFile>& files = *storage->files;

    ModelInfo m;
    m.path = dir;
    m.format = "safetensors";
    m.hparams = cfg.hparams;

    std::vector<MappedTensor> mapped;
    std::map<std::string, std::string> hf_name_of;  // GGUF name -> HF name, to catch two names for one tensor
    std::map<std::string, std::vector<MappedTensor>> experts;  // GGUF name of a stack -> its parts by expert
    std::map<std::string, std::pair<std::optional<MappedTensor>, std::optional<MappedTensor>>> mxfp4;  // blocks, scales
    for (const SafetensorsFile& file : files) {
        m.file_size += file.file_size();
        for (const SafetensorsTensor& st : file.tensors()) {
            const HfTensorName name = map_hf_tensor_name(cfg.hparams.architecture, st.name);
            if (name.kind == HfTensorName::Kind::Ignored) continue;
            if (name.kind == HfTensorName::Kind::Unknown) {
                throw HfCheckpointError(file.path() + ": tensor '" + st.name + "' is not part of a " + cfg.model_type +
                                        " checkpoint (deskside knows no GGUF name for it)");
            }
            const std::string part = (name.expert >= 0 ? " expert " + std::to_string(name.expert) : "") +
                                     (name.piece == HfTensorName::Piece::Mxfp4Blocks   ? " blocks"
                                      : name.piece == HfTensorName::Piece::Mxfp4Scales ? " scales"
                                                                                       : "");
            if (auto [it, added] = hf_name_of.emplace(name.gguf + part, st.name); !added) {
                throw HfCheckpointError(file.path() + ": tensors '" + it->second + "' and '" + st.name +
                                        "' both map to " + name.gguf + part);
            }
            if (name.piece != HfTensorName::Piece::Whole) {
                auto& [blocks, scales] = mxfp4[name.gguf];
                (name.piece == HfTensorName::Piece::Mxfp4Blocks ? blocks : scales) = map_tensor(file, st, name, cfg);
                continue;
            }
            if (name.expert < 0) {
                MappedTensor t = map_tensor(file, st, name, cfg);
                if (const Interleaved* split = interleaved(name.gguf)) {
                    if (!name.gguf.ends_with(".bias")) {
                        throw HfCheckpointError(file.path() + ": tensor '" + st.name +
                                                "' holds dequantized experts; deskside reads gpt-oss experts as "
                                                "MXFP4 (_blocks and _scales), as OpenAI ships them");
                    }
                    mapped.push_back(rows_of(t, renamed(name.gguf, split->fused, split->even), 0, cfg, dir));
                    mapped.push_back(rows_of(t, renamed(name.gguf, split->fused, split->odd), 1, cfg, dir));
                    continue;
                }
                mapped.push_back(std::move(t));
                continue;
            }
            if (name.expert >= cfg.hparams.n_expert) {
                throw HfCheckpointError(file.path() + ": tensor '" + st.name + "' is expert " +
                                        std::to_string(name.expert) + ", but config.json has " +
                                        std::to_string(cfg.hparams.n_expert) + " experts (num_experts)");
            }
            std::vector<MappedTensor>& parts = experts[name.gguf];
            parts.resize(static_cast<size_t>(cfg.hparams.n_expert));
            parts[static_cast<size_t>(name.expert)] = map_tensor(file, st, name, cfg);
        }
    }
    for (auto& [gguf, parts] : experts) mapped.push_back(stack_experts(gguf, std::move(parts), cfg, dir));
    for (auto& [gguf, pieces] : mxfp4) {
        MappedTensor* blocks = pieces.first ? &*pieces.first : nullptr;
        MappedTensor* scales = pieces.second ? &*pieces.second : nullptr;
        if (const Interleaved* split = interleaved(gguf)) {
            mapped.push_back(mxfp4_tensor(renamed(gguf, split->fused, split->even), blocks, scales, 2, 0, cfg, dir));
            mapped.push_back(mxfp4_tensor(renamed(gguf, split->fused, split->odd), blocks, scales, 2, 1, cfg, dir));
        } else {
            mapped.push_back(mxfp4_tensor(gguf, blocks, scales, 1, 0, cfg, dir));
        }
    }
    for (size_t i = 0; i < cfg.config_tensors.size(); ++i) {
        const std::vector<float>& values = storage->config_floats.emplace_back(cfg.config_tensors[i].values);
        const Tensor t{cfg.config_tensors[i].name,
                       quant::TypeId::F32,
                       {static_cast<int64_t>(values.size())},
                       reinterpret_cast<const uint8_t*>(values.data()),
                       values.size() * sizeof(float)};
        mapped.push_back(MappedTensor{t, {kConfigTensors, static_cast<int>(i)}, "config.json rope_scaling", {}});
    }
    std::stable_sort(mapped.begin(), mapped.end(),
                     [](const MappedTensor& a, const MappedTensor& b) { return a.sort_key < b.sort_key; });

    // Tied heads reuse the embedding; HF ties whenever the config says so, even if an lm_head
    // was saved, and GGUF marks a tied head by leaving output.weight out.
    HfCheckpointParts out;
    m.hparams.tied_embeddings = cfg.tie_word_embeddings || !hf_name_of.count("output.weight");
    for (MappedTensor& t : mapped) {
        if (m.hparams.tied_embeddings && t.tensor.name == "output.weight") continue;
        if (!t.parts.empty()) {
            Stacked& s = out.stacked.emplace_back(std::move(t.recipe));
            s.tensor = m.tensors.size();
            s.parts = std::move(t.parts);
        }
        if (t.sort_key.first == kConfigTensors) out.made.push_back(m.tensors.size());
        m.tensors.push_back(std::move(t.tensor));
    }
    check_vocab_tensor(m, "token_embd.weight", "model.embed_tokens.weight");
    check_vocab_tensor(m, "output.weight", "lm_head.weight");

    HfTokenizerFacts tok = read_hf_tokenizer_facts(dir, cfg);
    m.tokenizer = std::move(tok.info);
    m.chat_template = std::move(tok.chat_template);
    m.storage = std::move(storage);
    out.info = std::move(m);
    return out;
}

}  // namespace deskside::models
