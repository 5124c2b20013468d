// What convert_hf_to_gguf.py changes between a checkpoint and its GGUF file, for the families
// deskside reads (the inverse of scripts/make-hf-checkpoint.py):
//   - llama/mistral (LlamaModel.permute): Q and K rows, weights and biases, are reordered per head
//     so that RoPE rotates adjacent pairs, not the halves HF rotates; K with the KV head count.
//   - gemma3 (Gemma3Model.modify_tensors): norm weights are stored as 1 + w, and token_embd keeps
//     only the vocabulary's rows.
//   - qwen3moe (Qwen2MoeModel.modify_tensors): each layer's per-expert matrices are stacked into one
//     tensor per projection ([n_embd, n_ff_exp, n_expert] in ggml order).
//   - phi3 (Phi3MiniModel.generate_extra_tensors): LongRoPE's factors become tensors, made from
//     config.json (hf_config.cpp; the checkpoint reader lists them with the weights).
//   - gpt-oss (GptOssModel): gate_up's interleaved rows split into gate and up, the experts' MXFP4
//     blocks and scales repacked as GGUF's MXFP4 (hf_checkpoint.cpp; copied here unchanged).
//   - every family (ModelBase.prepare_tensors): 1-D tensors, norms, MoE routers and tensors whose
//     names do not end in ".weight" (gpt-oss's 2-D expert biases) are written as F32. The converter reads BF16 as F32
//     before changing anything, F16 as F16; the +1 follows that.
// ref: llama.cpp conversion/llama.py, gemma.py, qwen.py, phi.py, base.py
#include "models/hf_to_gguf.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "models/hf_config.h"
#include "models/hf_gguf_metadata.h"
#include "models/hf_json.h"
#include "models/hparams_check.h"
#include "quant/quant.h"

namespace deskside::models {
namespace {

using quant::TypeId;

bool written_as_f32(const Tensor& t) {
    return t.shape.size() == 1 || t.name.ends_with("_norm.weight") || t.name.ends_with(".ffn_gate_inp.weight") ||
           !t.name.ends_with(".weight");
}

int64_t heads_to_permute(const Hparams& hp, const std::string& name) {
    if (hp.architecture != "llama" || !name.starts_with("blk.")) return 0;
    if (name.ends_with(".attn_q.weight") || name.ends_with(".attn_q.bias")) return hp.n_head;
    if (name.ends_with(".attn_k.weight") || name.ends_with(".attn_k.bias")) return hp.n_head_kv;
    return 0;
}

int64_t vocabulary_size(const std::vector<std::pair<std::string, GgufValue>>& metadata) {
    for (const auto& [key, value] : metadata) {
        if (key == "tokenizer.ggml.tokens") return static_cast<int64_t>(value.as_array().items.size());
    }
    return 0;
}

// The checkpoint row that LlamaModel.permute puts at `row`: within each head the rows were
// [first half | second half]; they become pairs (first[i], second[i]).
int64_t permuted_source_row(int64_t row, int64_t rows_per_head) {
    const int64_t head = row / rows_per_head, k = row % rows_per_head;
    return head * rows_per_head + (k % 2) * (rows_per_head / 2) + k / 2;
}

// torch's F16 arithmetic: the F32 result rounded to F16.
void round_to_f16(float* v, int64_t n) {
    std::vector<uint16_t> half(static_cast<size_t>(n));
    quant::quant_traits(TypeId::F16)->from_float(v, half.data(), n);
    quant::quant_traits(TypeId::F16)->to_float(half.data(), v, n);
}

HfCheckpointParts read_checked(const std::string& dir) {
    const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
    if (!std::filesystem::is_regular_file(config_path))
        throw HfCheckpointError(dir + ": no config.json (not a Hugging Face checkpoint directory)");
    HfCheckpointParts checkpoint = read_hf_checkpoint(dir, parse_hf_config(read_json_file(config_path), config_path));
    check_hparams(checkpoint.info, checkpoint.info.tokenizer.n_vocab);
    return checkpoint;
}

}  // namespace

HfAsGguf::HfAsGguf(const std::string& dir) : checkpoint_(read_checked(dir)), metadata_(hf_gguf_metadata(dir)) {
    const ModelInfo& checkpoint = checkpoint_.info;
    const Hparams& hp = checkpoint.hparams;
    const bool gemma = hp.norm_weight_plus_one;
    const int64_t n_vocab = vocabulary_size(metadata_);
    layout_ = checkpoint;
    layout_.tensors.clear();
    layout_.file_size = 0;
    layout_.hparams.norm_weight_plus_one = false;
    if (hp.architecture == "llama") layout_.hparams.rope_neox = false;
    for (size_t i = 0; i < checkpoint.tensors.size(); ++i) {
        const Tensor& src = checkpoint.tensors[i];
        Tensor t = src;
        if (gemma && t.name == "token_embd.weight" && n_vocab > 0 && t.shape[1] > n_vocab) {
            t.shape[1] = n_vocab;
            layout_.hparams.n_vocab = n_vocab;
        }
        const Plan plan{i, heads_to_permute(hp, t.name), gemma && t.name.ends_with("norm.weight"),
                        checkpoint_.parts_of(i)};
        if (plan.permute_heads > 0 && t.shape.back() % (2 * plan.permute_heads) != 0) {
            throw std::runtime_error(dir + ": tensor " + t.name + " has " + std::to_string(t.shape.back()) +
                                     " rows, not a whole number of row pairs for each of its " +
                                     std::to_string(plan.permute_heads) + " heads");
        }
        if (written_as_f32(t) && t.type != TypeId::MXFP4) t.type = TypeId::F32;
        t.n_bytes = quant::row_bytes(t.type, t.n_elements());
        if (t.type != src.type || plan.permute_heads > 0 || plan.plus_one || plan.parts) t.data = nullptr;
        layout_.file_size += t.n_bytes;
        layout_.tensors.push_back(std::move(t));
        plans_.push_back(plan);
    }
}

std::vector<Tensor> HfAsGguf::sources(size_t i) const {
    const Plan& plan = plans_[i];
    if (plan.parts) return plan.parts->parts;
    const std::vector<size_t>& made = checkpoint_.made;
    if (std::find(made.begin(), made.end(), plan.source) != made.end()) return {};
    return {checkpoint_.info.tensors[plan.source]};
}

Tensor HfAsGguf::tensor(size_t i, std::vector<uint8_t>& buf) const {
    const Plan& plan = plans_[i];
    const Tensor& src = checkpoint_.info.tensors[plan.source];
    Tensor out = layout_.tensors[i];
    if (out.data) return out;  // the checkpoint's bytes (a prefix of them for trimmed rows)

    const int64_t rows = out.shape.back();
    const int64_t per_row = out.n_elements() / std::max<int64_t>(rows, 1);
    const size_t src_row = quant::row_bytes(src.type, per_row), out_row = quant::row_bytes(out.type, per_row);
    const quant::ToFloatFn to_float = quant::quant_traits(src.type)->to_float;
    buf.resize(out.n_bytes);
    std::vector<uint8_t> assembled;  // an assembled tensor in the checkpoint's type, when that changes
    if (plan.parts) {
        if (out.type == src.type) {
            assemble(*plan.parts, buf.data());
            out.data = buf.data();
            return out;
        }
        assembled.resize(src.n_bytes);
        assemble(*plan.parts, assembled.data());
    }
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t from = plan.permute_heads > 0 ? permuted_source_row(r, rows / plan.permute_heads) : r;
        const uint8_t* row = (plan.parts ? assembled.data() : src.data) + from * src_row;
        if (out.type == src.type) {
            std::memcpy(buf.data() + r * out_row, row, out_row);
        } else {
            to_float(row, reinterpret_cast<float*>(buf.data() + r * out_row), per_row);
        }
    }
    if (plan.plus_one) {  // a norm, so written as F32: buf holds floats
        float* w = reinterpret_cast<float*>(buf.data());
        std::for_each(w, w + out.n_elements(), [](float& x) { x += 1.0f; });
        if (src.type == TypeId::F16) round_to_f16(w, out.n_elements());
    }
    out.data = buf.data();
    return out;
}

}  // namespace deskside::models
