// The engine's view of an architecture family: models::Family (models/family.h), where each
// family's tensors, RoPE style, quirks and forward-pass switches live, one file per family.
#pragma once

#include <string>

#include "models/family.h"

namespace deskside::engine {

using models::FfnActivation;
using models::Role;
using models::TensorSpec;
using models::is_expert_role;
using models::is_host_role;
using models::is_vector_role;
using models::is_layer_role;
using models::kRoleCount;
using ArchSpec = models::Family;

// The family of `architecture`; throws std::runtime_error naming it and the supported ones.
inline const ArchSpec& arch_spec(const std::string& architecture) { return models::family(architecture); }

}  // namespace deskside::engine
