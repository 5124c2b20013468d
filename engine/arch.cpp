#include "engine/arch.h"

#include <array>
#include <cmath>
#include <stdexcept>

namespace deskside::engine {

float inverse_sqrt_head_dim(const models::Hparams& hp) { return 1.0f / std::sqrt(static_cast<float>(hp.head_dim)); }

const ArchSpec& arch_spec(const std::string& architecture) {
    static const std::array kArchs{&kLlamaArch, &kQwen2Arch, &kGemma3Arch};
    for (const ArchSpec* a : kArchs) {
        if (a->name == architecture) return *a;
    }
    std::string names;
    for (const ArchSpec* a : kArchs) names += (names.empty() ? "" : ", ") + std::string(a->name);
    throw std::runtime_error("unsupported architecture '" + architecture + "' (supported: " + names + ")");
}

}  // namespace deskside::engine
