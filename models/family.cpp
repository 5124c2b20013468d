#include "models/family.h"

#include <array>
#include <cmath>
#include <stdexcept>

namespace deskside::models {

namespace {

constexpr std::array kFamilies{&kLlamaFamily, &kQwen2Family,  &kQwen3Family, &kQwen3MoeFamily,
                               &kPhi3Family,  &kGemma3Family, &kGptOssFamily};

}  // namespace

float inverse_sqrt_head_dim(const Hparams& hp) { return 1.0f / std::sqrt(static_cast<float>(hp.head_dim)); }

std::span<const Family* const> all_families() { return kFamilies; }

const Family* find_family(std::string_view architecture) {
    for (const Family* f : kFamilies) {
        if (f->name == architecture) return f;
    }
    return nullptr;
}

std::string family_names() {
    std::string names;
    for (const Family* f : kFamilies) names += (names.empty() ? "" : ", ") + std::string(f->name);
    return names;
}

const Family& family(std::string_view architecture) {
    if (const Family* f = find_family(architecture)) return *f;
    throw std::runtime_error("unsupported architecture '" + std::string(architecture) + "' (supported: " + family_names() + ")");
}

std::vector<int64_t> expected_shape(Role r, const Hparams& hp) {
    const int64_t q = hp.n_head * hp.head_dim, k = hp.n_head_kv * hp.head_dim, v = hp.n_head_kv * hp.head_dim_v;
    switch (r) {
        case Role::TokenEmbd:
        case Role::Output: return {hp.n_embd, hp.n_vocab};
        case Role::RopeFreqs:
        case Role::RopeFactorsShort:
        case Role::RopeFactorsLong: return {hp.n_rot / 2};
        case Role::AttnQkv: return {hp.n_embd, q + k + v};
        case Role::AttnQ: return {hp.n_embd, q};
        case Role::AttnK: return {hp.n_embd, k};
        case Role::AttnV: return {hp.n_embd, v};
        case Role::AttnQBias: return {q};
        case Role::AttnKBias: return {k};
        case Role::AttnVBias: return {v};
        case Role::AttnQNorm:
        case Role::AttnKNorm: return {hp.head_dim};
        case Role::AttnOutput: return {hp.n_head * hp.head_dim_v, hp.n_embd};
        case Role::AttnSinks: return {hp.n_head};
        case Role::FfnGateUp: return {hp.n_embd, 2 * hp.n_ff};
        case Role::FfnGate:
        case Role::FfnUp: return {hp.n_embd, hp.n_ff};
        case Role::FfnDown: return {hp.n_ff, hp.n_embd};
        case Role::FfnGateInp: return {hp.n_embd, hp.n_expert};
        case Role::FfnGateInpBias: return {hp.n_expert};
        case Role::FfnGateExps:
        case Role::FfnUpExps: return {hp.n_embd, hp.n_ff_exp, hp.n_expert};
        case Role::FfnDownExps: return {hp.n_ff_exp, hp.n_embd, hp.n_expert};
        case Role::FfnGateExpsBias:
        case Role::FfnUpExpsBias: return {hp.n_ff_exp, hp.n_expert};
        case Role::FfnDownExpsBias: return {hp.n_embd, hp.n_expert};
        case Role::OutputNorm:
        case Role::AttnNorm:
        case Role::AttnOutputBias:
        case Role::PostAttnNorm:
        case Role::FfnNorm:
        case Role::PostFfnNorm: return {hp.n_embd};
        case Role::Count: break;
    }
    return {};
}

}  // namespace deskside::models
