#include "engine/weights.h"

#include <algorithm>
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
// Tensors that go to another host's devices (--split-hosts) are skipped; host floats (RoPE
// factors) are read by every host, with a local device passed for form's sake.
template <class Fn>
void for_each_placed(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices,
                     const ExpertPlacement& experts, Fn&& fn) {
    const models::Hparams& hp = info.hparams;
    std::vector<backends::Backend*> layer_device(hp.n_layer);  // nullptr: another host's layer
    backends::Backend* local = nullptr;
    for (const DeviceLayers& d : devices) {
        for (int64_t il = d.layer_begin; il < d.layer_end; ++il) layer_device[il] = d.backend;
        if (!local) local = d.backend;
    }
    // Model-wide tensors: the embedding feeds the first layer, the output norm and head read the
    // last layer's residual stream.
    backends::Backend* first = devices.front().backend;
    backends::Backend* last = devices.back().backend;
    for (const TensorSpec& spec : arch.tensors) {
        const bool per_layer = is_layer_role(spec.role);
        for (int64_t il = 0; il < (per_layer ? hp.n_layer : 1); ++il) {
            const std::string name = per_layer ? "blk." + std::to_string(il) + "." + std::string(spec.name) : std::string(spec.name);
            const models::Tensor* t = info.find(name);
            if (!t) {
                if (spec.required) throw std::runtime_error(info.path + ": missing tensor '" + name + "'");
                continue;
            }
            backends::Backend* device = !per_layer && is_host_role(spec.role) ? local
                                        : !per_layer                  ? (spec.role == Role::TokenEmbd ? first : last)
                                        : !layer_device[il]           ? nullptr
                                        : is_expert_role(spec.role)   ? &expert_device(devices, experts, il)
                                                                      : layer_device[il];
            if (device) fn(spec, name, *t, *device, per_layer ? il : -1);
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
            if (tied && devices.back().backend)
                require_support(info, *devices.back().backend, backends::Op::Matmul, t.type, what + " (the tied output head)");
        } else {
            require_support(info, device, spec.role >= Role::FfnGateExps ? backends::Op::MatmulId : backends::Op::Matmul,
                            t.type, what);
        }
    });
    for (const DeviceLayers& d : devices) {
        if (d.remote()) continue;
        for (const auto& [type, which] : {std::pair{cache.type_k, "the K cache"}, std::pair{cache.type_v, "the V cache"}}) {
            require_support(info, *d.backend, backends::Op::SetRows, type, which);
            require_support(info, *d.backend, backends::Op::Attention, type, which);
        }
    }
}

namespace {

// A tensor to place, collected first: the checks run in the tensor table's order, the placing
// device by device, so that progress reads as one device filled after another.
struct Pending {
    Role role;
    const models::Tensor* tensor;
    std::vector<int64_t> shape;
    backends::Backend* device;
    int64_t il;      // -1: model-wide
    uint64_t bytes;  // as placed: vectors as F32
};

// Reports each placement to a LoadProgress with per-device and overall byte counts.
class PlacementReport {
   public:
    PlacementReport(const LoadProgress& progress, std::span<backends::Backend* const> order, std::span<const Pending> all)
        : progress_(progress), order_(order.begin(), order.end()), totals_(order.size(), 0) {
        for (const Pending& p : all) {
            totals_[rank(p.device)] += p.bytes;
            total_ += p.bytes;
        }
    }
    size_t rank(const backends::Backend* device) const {
        return static_cast<size_t>(std::find(order_.begin(), order_.end(), device) - order_.begin());
    }
    // Before placing `p`: announces its device when it is the first of that device's tensors.
    void before(const Pending& p) {
        const size_t r = rank(p.device);
        if (started_ && r == current_) return;
        started_ = true;
        current_ = r;
        device_done_ = 0;
        report();
    }
    void after(const Pending& p) {
        device_done_ += p.bytes;
        done_ += p.bytes;
        report();
    }

   private:
    void report() const {
        if (!progress_) return;
        const backends::Backend& b = *order_[current_];
        LoadStep s;
        s.device = b.name();
        s.action = b.n_threads() > 0 ? "repacking" : "uploading";  // a CPU device reads host memory
        s.device_index = static_cast<int>(current_);
        s.n_devices = static_cast<int>(order_.size());
        s.device_done = device_done_;
        s.device_total = totals_[current_];
        s.done = done_;
        s.total = total_;
        progress_(s);
    }
    const LoadProgress& progress_;
    std::vector<backends::Backend*> order_;
    std::vector<uint64_t> totals_;
    uint64_t total_ = 0, done_ = 0, device_done_ = 0;
    size_t current_ = 0;
    bool started_ = false;
};

uint64_t pending_bytes(Role role, const models::Tensor& t, const std::vector<int64_t>& shape) {
    if (!models::is_vector_role(role)) return t.n_bytes;
    return static_cast<uint64_t>(shape[0] * outer_rows(shape)) * sizeof(float);
}

}  // namespace

ModelWeights::ModelWeights(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices,
                           const ExpertPlacement& experts, const LoadProgress& progress) {
    const models::Hparams& hp = info.hparams;
    check_device_layers(devices, hp.n_layer);
    backends::Backend* first = devices.front().backend;  // nullptr: on another host (--split-hosts)
    backends::Backend* last = devices.back().backend;
    layers_.resize(hp.n_layer);
    std::vector<Pending> pending;
    bool has_output = false;
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
        has_output = has_output || spec.role == Role::Output;
        pending.push_back({spec.role, &t, shape, &device, il, pending_bytes(spec.role, t, shape)});
    });
    // Tied embeddings: the head is token_embd, placed again on the last device when that is another.
    const models::Tensor* embd = info.find("token_embd.weight");
    if (!has_output && last && first != last) {
        const std::vector<int64_t> shape = models::expected_shape(Role::Output, hp);
        pending.push_back({Role::Output, embd, shape, last, -1, pending_bytes(Role::Output, *embd, shape)});
    }

    std::vector<backends::Backend*> order;
    const auto add = [&](backends::Backend* b) {
        if (std::find(order.begin(), order.end(), b) == order.end()) order.push_back(b);
    };
    for (const DeviceLayers& d : devices)
        if (!d.remote()) add(d.backend);
    for (const Pending& p : pending) add(p.device);  // the expert host, when it is none of the devices
    PlacementReport report(progress, order, pending);
    std::stable_sort(pending.begin(), pending.end(),
                     [&](const Pending& a, const Pending& b) { return report.rank(a.device) < report.rank(b.device); });
    for (const Pending& p : pending) {
        report.before(p);
        RoleTable& table = p.il >= 0 ? layers_[p.il] : global_;
        const std::vector<Part> parts = fused_parts(p.role, hp);
        if (parts.empty()) {
            table[static_cast<int>(p.role)] = place(info, *p.tensor, p.role, p.shape, *p.device);
        } else {
            int64_t row = 0;
            for (const Part& part : parts) {
                table[static_cast<int>(part.role)] =
                    place(info, *p.tensor, part.role, {p.shape[0], part.rows}, *p.device, row);
                row += part.rows;
            }
        }
        report.after(p);
    }
    if (get(Role::Output).empty()) global_[static_cast<int>(Role::Output)] = get(Role::TokenEmbd);
}

}  // namespace deskside::engine
