#include "engine/weights.h"

#include <stdexcept>
#include <string>

#include "quant/quant.h"

namespace deskside::engine {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// The shape each role must have, from the hyperparameters (ggml order: contiguous first).
std::vector<int64_t> expected_shape(Role r, const models::Hparams& hp) {
    const int64_t q = hp.n_head * hp.head_dim, k = hp.n_head_kv * hp.head_dim, v = hp.n_head_kv * hp.head_dim_v;
    switch (r) {
        case Role::TokenEmbd:
        case Role::Output: return {hp.n_embd, hp.n_vocab};
        case Role::RopeFreqs: return {hp.n_rot / 2};
        case Role::AttnQ: return {hp.n_embd, q};
        case Role::AttnK: return {hp.n_embd, k};
        case Role::AttnV: return {hp.n_embd, v};
        case Role::AttnQBias: return {q};
        case Role::AttnKBias: return {k};
        case Role::AttnVBias: return {v};
        case Role::AttnQNorm:
        case Role::AttnKNorm: return {hp.head_dim};
        case Role::AttnOutput: return {hp.n_head * hp.head_dim_v, hp.n_embd};
        case Role::FfnGate:
        case Role::FfnUp: return {hp.n_embd, hp.n_ff};
        case Role::FfnDown: return {hp.n_ff, hp.n_embd};
        case Role::OutputNorm:
        case Role::AttnNorm:
        case Role::PostAttnNorm:
        case Role::FfnNorm:
        case Role::PostFfnNorm: return {hp.n_embd};
        case Role::Count: break;
    }
    return {};
}

}  // namespace

backends::Tensor ModelWeights::place(const models::ModelInfo& info, const models::Tensor& t,
                                     const std::vector<int64_t>& shape, backends::Backend& backend) {
    const quant::QuantTraits* traits = quant::quant_traits(t.type);
    if (!traits)
        throw std::runtime_error(info.path + ": tensor '" + t.name + "' has type " +
                                 std::string(quant::type_info(t.type).name) + ", which deskside cannot compute with");
    if (shape.size() == 1) {
        // Vectors (norms, biases) are used as F32 by the element-wise ops; convert the rare
        // file that stores them otherwise.
        std::vector<float> values(shape[0]);
        traits->to_float(t.data, values.data(), shape[0]);
        auto buf = backend.alloc(values.size() * sizeof(float));
        backend.upload(*buf, 0, values.data(), values.size() * sizeof(float));
        backends::Tensor out = backends::make_tensor(buf.get(), 0, quant::TypeId::F32, shape[0], 1);
        buffers_.push_back(std::move(buf));
        return out;
    }
    // The backend sees the matrix's type and shape: the CPU backend may store it interleaved.
    auto buf = backend.map_weight_matrix(t.data, t.type, shape[0], shape[1]);
    backends::Tensor out = backends::make_tensor(buf.get(), 0, t.type, shape[0], shape[1]);
    buffers_.push_back(std::move(buf));
    return out;
}

ModelWeights::ModelWeights(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices) {
    const models::Hparams& hp = info.hparams;
    check_device_layers(devices, hp.n_layer);
    std::vector<backends::Backend*> layer_device(hp.n_layer);
    for (const DeviceLayers& d : devices)
        for (int64_t il = d.layer_begin; il < d.layer_end; ++il) layer_device[il] = d.backend;
    backends::Backend& first = *devices.front().backend;
    backends::Backend& last = *devices.back().backend;
    // Model-wide tensors: the embedding feeds the first layer, the output norm and head read the
    // last layer's residual stream.
    const auto global_device = [&](Role r) -> backends::Backend& { return r == Role::TokenEmbd ? first : last; };

    layers_.resize(hp.n_layer);
    for (const TensorSpec& spec : arch.tensors) {
        const int64_t n_copies = is_layer_role(spec.role) ? hp.n_layer : 1;
        for (int64_t il = 0; il < n_copies; ++il) {
            const std::string name =
                is_layer_role(spec.role) ? "blk." + std::to_string(il) + "." + std::string(spec.name) : std::string(spec.name);
            const models::Tensor* t = info.find(name);
            if (!t) {
                if (spec.required) throw std::runtime_error(info.path + ": missing tensor '" + name + "'");
                continue;
            }
            const std::vector<int64_t> shape = expected_shape(spec.role, hp);
            if (t->shape != shape)
                throw std::runtime_error(info.path + ": tensor '" + name + "' has shape " + shape_text(t->shape) +
                                         ", expected " + shape_text(shape));
            if (spec.role == Role::RopeFreqs) {
                const quant::QuantTraits* traits = quant::quant_traits(t->type);
                if (!traits) throw std::runtime_error(info.path + ": tensor '" + name + "' has an unsupported type");
                rope_freqs_.resize(shape[0]);
                traits->to_float(t->data, rope_freqs_.data(), shape[0]);
                continue;
            }
            if (is_layer_role(spec.role)) layers_[il][static_cast<int>(spec.role)] = place(info, *t, shape, *layer_device[il]);
            else global_[static_cast<int>(spec.role)] = place(info, *t, shape, global_device(spec.role));
        }
    }
    if (get(Role::Output).empty()) {
        // Tied embeddings: the head is token_embd, needed on the last device too.
        const models::Tensor* t = info.find("token_embd.weight");
        global_[static_cast<int>(Role::Output)] =
            &first == &last ? get(Role::TokenEmbd) : place(info, *t, expected_shape(Role::Output, hp), last);
    }
}

}  // namespace deskside::engine
