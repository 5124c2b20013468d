// A model's weights placed on a backend: one backends::Tensor per Role, model-wide and per
// layer, checked against the hyperparameters' shapes at load.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "engine/arch.h"
#include "models/model.h"

namespace deskside::engine {

class ModelWeights {
   public:
    // Throws std::runtime_error naming the file and tensor when one is missing, has the wrong
    // shape, or has a type the backend cannot compute with.
    ModelWeights(const models::ModelInfo& info, const ArchSpec& arch, backends::Backend& backend);

    // Model-wide tensor (empty Tensor when an optional one is absent).
    const backends::Tensor& get(Role r) const { return global_[static_cast<int>(r)]; }
    const backends::Tensor& layer(int64_t il, Role r) const { return layers_[il][static_cast<int>(r)]; }
    // rope_freqs as host floats (empty when the file has none).
    const std::vector<float>& rope_freqs() const { return rope_freqs_; }

   private:
    using RoleTable = std::array<backends::Tensor, kRoleCount>;
    backends::Tensor place(const models::ModelInfo& info, const models::Tensor& t, const std::vector<int64_t>& shape,
                           backends::Backend& backend);

    RoleTable global_{};
    std::vector<RoleTable> layers_;
    std::vector<float> rope_freqs_;
    std::vector<std::unique_ptr<backends::Buffer>> buffers_;
};

}  // namespace deskside::engine
