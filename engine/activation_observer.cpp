// The Model's layer matmuls and what they show an ActivationObserver (activation_observer.h).
// Observing ends the device's step, downloads the input (and the expert ids) and begins the step
// again, so a device that records steps (CUDA graphs) replays nothing stale; without an observer
// the wrappers are the plain backend calls.
#include <string>
#include <vector>

#include "engine/model.h"

namespace deskside::engine {
namespace {

// The GGUF weight a layer matmul of `role` reads, or "" when another matmul of the step reports the
// same input: the later parts of a fused tensor (Q and V after K, up after gate).
std::string observed_weight(const ArchSpec& arch, int64_t il, Role role) {
    Role source = role;
    if (arch.fused_qkv && (role == Role::AttnQ || role == Role::AttnK || role == Role::AttnV)) {
        if (role != Role::AttnK) return {};
        source = Role::AttnQkv;
    }
    if (arch.fused_gate_up && (role == Role::FfnGate || role == Role::FfnUp)) {
        if (role != Role::FfnGate) return {};
        source = Role::FfnGateUp;
    }
    for (const TensorSpec& t : arch.tensors) {
        if (t.role == source) return "blk." + std::to_string(il) + "." + std::string(t.name);
    }
    return {};
}

// The rows of a contiguous-row view, to the host.
template <typename T>
std::vector<T> download_rows(backends::Backend& be, const backends::Tensor& t) {
    std::vector<T> out(static_cast<size_t>(t.ne0 * t.ne1));
    const size_t row = static_cast<size_t>(t.ne0) * sizeof(T);
    for (int64_t r = 0; r < t.ne1; ++r)
        be.download(*t.buffer, t.offset + static_cast<size_t>(r) * t.row_stride, out.data() + r * t.ne0, row);
    return out;
}

}  // namespace

void Model::matmul(backends::Backend& be, int64_t il, Role role, const backends::Tensor& x, const backends::Tensor& y) {
    if (observer_) observe(be, il, role, x, nullptr);
    be.matmul(weights_.layer(il, role), x, y);
}

void Model::matmul_id(backends::Backend& be, int64_t il, Role role, const backends::Tensor& x,
                      const backends::Tensor& ids, const backends::Tensor& y) {
    if (observer_) observe(be, il, role, x, &ids);
    be.matmul_id(weights_.layer(il, role), info_.hparams.n_expert, x, ids, y);
}

void Model::observe(backends::Backend& be, int64_t il, Role role, const backends::Tensor& x,
                    const backends::Tensor* ids) {
    const std::string name = observed_weight(arch_, il, role);
    if (name.empty()) return;
    be.end_step();
    const std::vector<float> rows = download_rows<float>(be, x);
    const std::vector<int32_t> experts = ids ? download_rows<int32_t>(be, *ids) : std::vector<int32_t>{};
    be.begin_step();
    if (ids) observer_->matmul_id(name, info_.hparams.n_expert, rows, x.ne0, experts, ids->ne0);
    else observer_->matmul(name, rows, x.ne0);
}

}  // namespace deskside::engine
