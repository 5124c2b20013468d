// A model's weights placed on one or several backends: one backends::Tensor per Role, model-wide
// and per layer, checked against the hyperparameters' shapes at load. Each layer's tensors go to
// the device that runs the layer; the token embedding to the first device and the output norm and
// head to the last (see engine/placement.h for why).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "engine/arch.h"
#include "engine/device_layers.h"
#include "engine/kv_cache.h"
#include "engine/load_progress.h"
#include "models/model.h"

namespace deskside::engine {

// Where a mixture-of-experts model's expert blocks (router and experts) live: on each layer's
// device, or for the first `n_layers` layers on `host` (--cpu-moe: every layer; --n-cpu-moe N),
// which then runs those blocks (only the block's input and output cross).
struct ExpertPlacement {
    backends::Backend* host = nullptr;
    int64_t n_layers = 0;
};

// The device that holds and runs layer `il`'s expert block.
backends::Backend& expert_device(std::span<const DeviceLayers> devices, const ExpertPlacement& experts, int64_t il);

// Checks, before anything is allocated, that every weight and the KV cache types run on the device
// they are placed on (Backend::supports); throws std::runtime_error naming the tensor, its type and
// the device otherwise. The Model calls it first.
void check_supported(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices,
                     const KvCacheConfig& cache, const ExpertPlacement& experts = {});

class ModelWeights {
   public:
    // Throws std::runtime_error naming the file and tensor when one is missing, has the wrong
    // shape, or has a type the backend cannot compute with.
    // `devices` satisfies check_device_layers.
    // Fused tensors (AttnQkv, FfnGateUp) are split into their parts' row ranges (AttnQ/K/V,
    // FfnGate/FfnUp), each mapped as a matrix of its own; stacked experts are one matrix of
    // n_expert * n_out rows. Tensors are placed device by device (`devices` in order, then the
    // expert host), each placement reported to `progress` when given.
    ModelWeights(const models::ModelInfo& info, const ArchSpec& arch, std::span<const DeviceLayers> devices,
                 const ExpertPlacement& experts = {}, const LoadProgress& progress = {});

    // Model-wide tensor (empty Tensor when an optional one is absent). TokenEmbd is on the first
    // device, OutputNorm and Output on the last (Output is token_embd placed again there when the
    // embeddings are tied and the model spans several devices).
    const backends::Tensor& get(Role r) const { return global_[static_cast<int>(r)]; }
    const backends::Tensor& layer(int64_t il, Role r) const { return layers_[il][static_cast<int>(r)]; }
    // RopeFreqs / RopeFactorsShort / RopeFactorsLong as host floats (empty when the file has none).
    const std::vector<float>& host_floats(Role r) const { return host_[static_cast<int>(r)]; }

   private:
    using RoleTable = std::array<backends::Tensor, kRoleCount>;
    // A vector role as F32 [shape[0], rest]; a matrix as [shape[0], rows], `row_begin` rows in.
    backends::Tensor place(const models::ModelInfo& info, const models::Tensor& t, Role role,
                           const std::vector<int64_t>& shape, backends::Backend& backend, int64_t row_begin = 0);

    RoleTable global_{};
    std::vector<RoleTable> layers_;
    std::array<std::vector<float>, kRoleCount> host_;
    std::vector<std::unique_ptr<backends::Buffer>> buffers_;
};

}  // namespace deskside::engine
