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

// The parts a fused tensor is split into at load, with their row counts.
struct Part {
    Role role;
    int64_t rows;
};
std::vector<Part> fused_parts(Role r, const models::Hparams& hp) {
    if (r == Role::AttnQkv)
        return {{Role::AttnQ, hp.n_head * hp.head_dim}, {Role::AttnK, hp.n_head_kv * hp.head_dim},
                {Role::AttnV, hp.n_head_kv * hp.head_dim_v}};
    if (r == Role::FfnGateUp) return {{Role::FfnGate, hp.n_ff}, {Role::FfnUp, hp.n_ff}};
    return {};
}

bool is_norm_role(Role r) {
    switch (r) {
        case Role::OutputNorm: case Role::AttnNorm: case Role::AttnQNorm: case Role::AttnKNorm: case Role::PostAttnNorm:
        case Role::FfnNorm: case Role::PostFfnNorm: return true;
        default: return false;
    }
}

int64_t outer_rows(const std::vector<int64_t>& shape) {
    int64_t rows = 1;
    for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
    return rows;
}

}  // namespace

backends::Tensor ModelWeights::place(const models::ModelInfo& info, const models::Tensor& t, Role role,
                                     const std::vector<int64_t>& shape, backends::Backend& backend, int64_t row_begin) {
    const quant::QuantTraits* traits = quant::quant_traits(t.type);
    if (!traits)
        throw std::runtime_error(info.path + ": tensor '" + t.name + "' has type " +
                                 std::string(quant::type_info(t.type).name) + ", which deskside cannot compute with");
    const int64_t rows = outer_rows(shape);
    if (models::is_vector_role(role)) {
        // Vectors (norms, biases, sinks) are used as F32 by the element-wise ops; convert the
        // rare file that stores them otherwise. Per-expert biases are [n, n_expert].
        std::vector<float> values(static_cast<size_t>(shape[0] * rows));
        traits->to_float(t.data, values.data(), shape[0] * rows);
        if (info.hparams.norm_weight_plus_one && is_norm_role(role))
            for (float& v : values) v += 1.0f;  // Gemma checkpoints store w for x * (1 + w)
        auto buf = backend.alloc(values.size() * sizeof(float));
        backend.upload(*buf, 0, values.data(), values.size() * sizeof(float));
        backends::Tensor out = backends::make_tensor(buf.get(), 0, quant::TypeId::F32, shape[0], rows);
        buffers_.push_back(std::move(buf));
        return out;
    }
    // The backend sees the matrix's type and shape: the CPU backend may store it interleaved.
    const uint8_t* first = t.data + quant::row_bytes(t.type, shape[0]) * static_cast<size_t>(row_begin);
    auto buf = backend.map_weight_matrix(first, t.type, shape[0], rows);
    backends::Tensor out = backends::make_tensor(buf.get(), 0, t.type, shape[0], rows);
    buffers_.push_back(std::move(buf));
    return out;
}

namespace {

// Calls fn(spec, name, tensor, device, layer) for every tensor of `arch` present in the file, on
// the device it goes to (layer -1 for model-wide tensors); throws for a required one that is missing.
template <class Fn>
void for_each_placed(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices,
                     const ExpertPlacement& experts, Fn&& fn) {
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
            backends::Backend& device = !per_layer                    ? (spec.role == Role::TokenEmbd ? first : last)
                                        : is_expert_role(spec.role) ? expert_device(devices, experts, il)
                                                                    : *layer_device[il];
            fn(spec, name, *t, device, per_layer ? il : -1);
        }
    }
}

void require_support(const models::ModelInfo& info, const backends::Backend& device, backends::Op op,
                     quant::TypeId type, const std::string& what) {
    if (device.supports(op, type)) return;
    std::string supported;
    for (const quant::TypeInfo& t : quant::all_types())
        if (device.supports(op, t.id)) supported += (supported.empty() ? "" : ", ") + std::string(t.name);
    throw std::runtime_error(info.path + ": " + what + " is " + std::string(quant::type_info(type).name) +
                             ", and device '" + device.name() + "' has no " + backends::op_name(op) + " for " +
                             std::string(quant::type_info(type).name) + " (it has " +
                             (supported.empty() ? "none" : supported) + "; place those layers on another device)");
}

}  // namespace

backends::Backend& expert_device(std::span<const DeviceLayers> devices, const ExpertPlacement& experts, int64_t il) {
    if (experts.host && il < experts.n_layers) return *experts.host;
    for (const DeviceLayers& d : devices)
        if (il >= d.layer_begin && il < d.layer_end) return *d.backend;
    throw std::invalid_argument("layer " + std::to_string(il) + " is on no device");
}

void check_supported(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices,
                     const KvCacheConfig& cache, const ExpertPlacement& experts) {
    check_device_layers(devices, info.hparams.n_layer);
    const bool tied = !info.find("output.weight");
    for_each_placed(info, arch, devices, experts, [&](const TensorSpec& spec, const std::string& name, const models::Tensor& t,
                                                      const backends::Backend& device, int64_t) {
        const std::string what = "tensor '" + name + "'";
        if (spec.role == Role::FfnGateExps) {
            std::vector<backends::Op> ops{backends::Op::MoeRoute, backends::Op::MoeCombine};
            if (arch.activation == FfnActivation::SwigluOai) ops.push_back(backends::Op::SwigluOai);
            if (info.find("blk.0.ffn_gate_exps.bias")) ops.push_back(backends::Op::AddId);
            for (backends::Op op : ops) require_support(info, device, op, quant::TypeId::F32, "the expert block of " + what);
        }
        if (is_host_role(spec.role) || is_vector_role(spec.role)) return;  // host floats / F32 vectors
        if (spec.role == Role::TokenEmbd) {
            require_support(info, device, backends::Op::GetRows, t.type, what);
            if (tied) require_support(info, *devices.back().backend, backends::Op::Matmul, t.type, what + " (the tied output head)");
        } else {
            require_support(info, device, spec.role >= Role::FfnGateExps ? backends::Op::MatmulId : backends::Op::Matmul,
                            t.type, what);
        }
    });
    for (const DeviceLayers& d : devices) {
        for (const auto& [type, which] : {std::pair{cache.type_k, "the K cache"}, std::pair{cache.type_v, "the V cache"}}) {
            require_support(info, *d.backend, backends::Op::SetRows, type, which);
            require_support(info, *d.backend, backends::Op::Attention, type, which);
        }
    }
}

ModelWeights::ModelWeights(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices,
                           const ExpertPlacement& experts) {
    const models::Hparams& hp = info.hparams;
    check_device_layers(devices, hp.n_layer);
    backends::Backend& first = *devices.front().backend;
    backends::Backend& last = *devices.back().backend;
    layers_.resize(hp.n_layer);
    for_each_placed(info, arch, devices, experts, [&](const TensorSpec& spec, const std::string& name, const models::Tensor& t,
                                                      backends::Backend& device, int64_t il) {
        const std::vector<int64_t> shape = models::expected_shape(spec.role, hp);
        if (t.shape != shape)
            throw std::runtime_error(info.path + ": tensor '" + name + "' has shape " + shape_text(t.shape) +
                                     ", expected " + shape_text(shape));
        if (is_host_role(spec.role)) {
            const quant::QuantTraits* traits = quant::quant_traits(t.type);
            if (!traits) throw std::runtime_error(info.path + ": tensor '" + name + "' has an unsupported type");
            std::vector<float>& values = host_[static_cast<int>(spec.role)];
            values.resize(shape[0]);
            traits->to_float(t.data, values.data(), shape[0]);
            return;
        }
        RoleTable& table = il >= 0 ? layers_[il] : global_;
        const std::vector<Part> parts = fused_parts(spec.role, hp);
        if (parts.empty()) {
            table[static_cast<int>(spec.role)] = place(info, t, spec.role, shape, device);
            return;
        }
        int64_t row = 0;
        for (const Part& part : parts) {
            table[static_cast<int>(part.role)] = place(info, t, part.role, {shape[0], part.rows}, device, row);
            row += part.rows;
        }
    });
    if (get(Role::Output).empty()) {
        // Tied embeddings: the head is token_embd, needed on the last device too.
        const models::Tensor* t = info.find("token_embd.weight");
        global_[static_cast<int>(Role::Output)] =
            &first == &last ? get(Role::TokenEmbd) : place(info, *t, Role::Output, models::expected_shape(Role::Output, hp), last);
    }
}

}  // namespace deskside::engine
