#include "engine/weights.h"

#include <stdexcept>
#include <string>
#include <utility>

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

namespace {

// Calls fn(spec, name, tensor, device, layer) for every tensor of `arch` present in the file, on
// the device it goes to (layer -1 for model-wide tensors); throws for a required one that is missing.
template <class Fn>
void for_each_placed(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices, Fn&& fn) {
    const models::Hparams& hp = info.hparams;
    std::vector<backends::Backend*> layer_device(hp.n_layer);
    for (const DeviceLayers& d : devices)
        for (int64_t il = d.layer_begin; il < d.layer_end; ++il) layer_device[il] = d.backend;
    // Model-wide tensors: the embedding feeds the first layer, the output norm and head read the
    // last layer's residual stream.
    backends::Backend& first = *devices.front().backend;
    backends::Backend& last = *devices.back().backend;
    for (const TensorSpec& spec : arch.tensors) {
        const bool per_layer = is_layer_role(spec.role);
        for (int64_t il = 0; il < (per_layer ? hp.n_layer : 1); ++il) {
            const std::string name = per_layer ? "blk." + std::to_string(il) + "." + std::string(spec.name) : std::string(spec.name);
            const models::Tensor* t = info.find(name);
            if (!t) {
                if (spec.required) throw std::runtime_error(info.path + ": missing tensor '" + name + "'");
                continue;
            }
            backends::Backend& device = per_layer ? *layer_device[il] : spec.role == Role::TokenEmbd ? first : last;
            fn(spec, name, *t, device, per_layer ? il : -1);
        }
    }
}

void require_support(const models::ModelInfo& info, const backends::Backend& device, backends::Op op,
                     quant::TypeId type, const std::string& what) {
    if (device.supports(op, type)) return;
    throw std::runtime_error(info.path + ": " + what + " is " + std::string(quant::type_info(type).name) +
                             ", and device '" + device.name() + "' has no " + backends::op_name(op) + " for " +
                             std::string(quant::type_info(type).name) + " (place those layers on another device)");
}

}  // namespace

void check_supported(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices,
                     const KvCacheConfig& cache) {
    check_device_layers(devices, info.hparams.n_layer);
    const bool tied = !info.find("output.weight");
    for_each_placed(info, arch, devices, [&](const TensorSpec& spec, const std::string& name, const models::Tensor& t,
                                             const backends::Backend& device, int64_t) {
        if (spec.role == Role::RopeFreqs || t.shape.size() == 1) return;  // host floats / F32 vectors
        const std::string what = "tensor '" + name + "'";
        if (spec.role == Role::TokenEmbd) {
            require_support(info, device, backends::Op::GetRows, t.type, what);
            if (tied) require_support(info, *devices.back().backend, backends::Op::Matmul, t.type, what + " (the tied output head)");
        } else {
            require_support(info, device, backends::Op::Matmul, t.type, what);
        }
    });
    for (const DeviceLayers& d : devices) {
        for (const auto& [type, which] : {std::pair{cache.type_k, "the K cache"}, std::pair{cache.type_v, "the V cache"}}) {
            require_support(info, *d.backend, backends::Op::SetRows, type, which);
            require_support(info, *d.backend, backends::Op::Attention, type, which);
        }
    }
}

ModelWeights::ModelWeights(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices) {
    const models::Hparams& hp = info.hparams;
    check_device_layers(devices, hp.n_layer);
    backends::Backend& first = *devices.front().backend;
    backends::Backend& last = *devices.back().backend;
    layers_.resize(hp.n_layer);
    for_each_placed(info, arch, devices, [&](const TensorSpec& spec, const std::string& name, const models::Tensor& t,
                                             backends::Backend& device, int64_t il) {
        const std::vector<int64_t> shape = expected_shape(spec.role, hp);
        if (t.shape != shape)
            throw std::runtime_error(info.path + ": tensor '" + name + "' has shape " + shape_text(t.shape) +
                                     ", expected " + shape_text(shape));
        if (spec.role == Role::RopeFreqs) {
            const quant::QuantTraits* traits = quant::quant_traits(t.type);
            if (!traits) throw std::runtime_error(info.path + ": tensor '" + name + "' has an unsupported type");
            rope_freqs_.resize(shape[0]);
            traits->to_float(t.data, rope_freqs_.data(), shape[0]);
            return;
        }
        if (il >= 0) layers_[il][static_cast<int>(spec.role)] = place(info, t, shape, device);
        else global_[static_cast<int>(spec.role)] = place(info, t, shape, device);
    });
    if (get(Role::Output).empty()) {
        // Tied embeddings: the head is token_embd, needed on the last device too.
        const models::Tensor* t = info.find("token_embd.weight");
        global_[static_cast<int>(Role::Output)] =
            &first == &last ? get(Role::TokenEmbd) : place(info, *t, expected_shape(Role::Output, hp), last);
    }
}

}  // namespace deskside::engine
