// The rules of llama-quantize's mixes, as data where they are data (names, exclusions, fallbacks)
// and as one function per tensor role where they depend on the layer.
// ref: llama.cpp src/llama-quant.cpp, tools/quantize/quantize.cpp (llama-cpp-python 0.3.36)
#include "models/quant_mix.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <stdexcept>

namespace deskside::models {
namespace {

using quant::TypeId;

// llama.cpp's llama_ftype values for the mixes below.
enum Ftype : uint32_t {
    kAllF32 = 0,
    kF16 = 1,
    kQ4_0 = 2,
    kQ4_1 = 3,
    kQ8_0 = 7,
    kQ5_0 = 8,
    kQ5_1 = 9,
    kQ2_K = 10,
    kQ3_K_S = 11,
    kQ3_K_M = 12,
    kQ3_K_L = 13,
    kQ4_K_S = 14,
    kQ4_K_M = 15,
    kQ5_K_S = 16,
    kQ5_K_M = 17,
    kQ6_K = 18,
    kIQ4_NL = 25,
    kIQ4_XS = 30,
    kBF16 = 32,
};

constexpr std::array kMixes{
    QuantMix{"Q4_0", kQ4_0, TypeId::Q4_0},       QuantMix{"Q4_1", kQ4_1, TypeId::Q4_1},
    QuantMix{"Q5_0", kQ5_0, TypeId::Q5_0},       QuantMix{"Q5_1", kQ5_1, TypeId::Q5_1},
    QuantMix{"Q2_K", kQ2_K, TypeId::Q2_K},       QuantMix{"Q3_K", kQ3_K_M, TypeId::Q3_K},
    QuantMix{"Q3_K_S", kQ3_K_S, TypeId::Q3_K},   QuantMix{"Q3_K_M", kQ3_K_M, TypeId::Q3_K},
    QuantMix{"Q3_K_L", kQ3_K_L, TypeId::Q3_K},   QuantMix{"IQ4_NL", kIQ4_NL, TypeId::IQ4_NL},
    QuantMix{"IQ4_XS", kIQ4_XS, TypeId::IQ4_XS}, QuantMix{"Q4_K", kQ4_K_M, TypeId::Q4_K},
    QuantMix{"Q4_K_S", kQ4_K_S, TypeId::Q4_K},   QuantMix{"Q4_K_M", kQ4_K_M, TypeId::Q4_K},
    QuantMix{"Q5_K", kQ5_K_M, TypeId::Q5_K},     QuantMix{"Q5_K_S", kQ5_K_S, TypeId::Q5_K},
    QuantMix{"Q5_K_M", kQ5_K_M, TypeId::Q5_K},   QuantMix{"Q6_K", kQ6_K, TypeId::Q6_K},
    QuantMix{"Q8_0", kQ8_0, TypeId::Q8_0},       QuantMix{"F16", kF16, TypeId::F16},
    QuantMix{"BF16", kBF16, TypeId::BF16},       QuantMix{"F32", kAllF32, TypeId::F32},
};

// Tensors llama-quantize never converts (tensor_allows_quantization), besides 1-D tensors and
// names that do not end in "weight": these substrings, and the two whole names after them.
constexpr std::array<std::string_view, 35> kKeptFragments{
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
    "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
    "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
    "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
    "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
    "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
    "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
};
// Positional embeddings and BERT's token types.
constexpr std::array<std::string_view, 2> kKeptNames{"position_embd.weight", "token_types.weight"};

// Architectures whose 80-layer (68 for jais2) models llama.cpp calls "70B", which changes attn_v.
struct SeventyB {
    std::string_view arch;
    int64_t n_layer;
    bool needs_gqa;  // llama's 80-layer models without GQA are the 65B
};
constexpr std::array kSeventyB{
    SeventyB{"llama", 80, true}, SeventyB{"qwen2", 80, false}, SeventyB{"olmo", 80, false},
    SeventyB{"deci", 80, false}, SeventyB{"jais2", 68, false},
};

// The tensor roles the rules distinguish (llama.cpp's tensor_category, reduced to the ones the
// mixes above read). attn_qkv and attn_kv_b follow attn_v's rules: llama.cpp tests for them in the
// attn_v branch first.
enum class Role { TokenEmbd, Output, AttnV, AttnK, AttnOutput, FfnDown, Other };

Role role_of(const std::string& name) {
    if (name == "output.weight") return Role::Output;
    if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Role::TokenEmbd;
    static constexpr std::array<std::pair<std::string_view, Role>, 6> kFragments{{
        {"attn_qkv.weight", Role::AttnV},
        {"attn_kv_b.weight", Role::AttnV},
        {"attn_v.weight", Role::AttnV},
        {"attn_k.weight", Role::AttnK},
        {"attn_output.weight", Role::AttnOutput},
        {"ffn_down", Role::FfnDown},
    }};
    // attn_q, ffn_up and ffn_gate come between these in llama.cpp's order, and none of them
    // contains a later fragment, so skipping them leaves every match unchanged.
    for (const auto& [fragment, role] : kFragments) {
        if (name.find(fragment) != std::string::npos) return role;
    }
    return Role::Other;
}

// ggml_n_dims: trailing dimensions of 1 do not count.
int n_dims(const std::vector<int64_t>& shape) {
    int n = 1;
    for (int i = 1; i < static_cast<int>(shape.size()); ++i) {
        if (shape[i] > 1) n = i + 1;
    }
    return n;
}

bool is_converted(const MixTensor& t) {
    if (n_dims(t.shape) < 2) return false;
    const std::string& name = t.name;
    if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
    if (std::find(kKeptNames.begin(), kKeptNames.end(), name) != kKeptNames.end()) return false;
    return std::none_of(kKeptFragments.begin(), kKeptFragments.end(),
                        [&](std::string_view f) { return name.find(f) != std::string::npos; });
}

int64_t layer_of(const std::string& name) {
    int layer = -1;
    return std::sscanf(name.c_str(), "blk.%d.", &layer) == 1 ? layer : -1;
}

bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// Walks the tensors in llama-quantize's order, counting attn_v and ffn_down tensors as it goes:
// the layer rules read those counts.
class MixRules {
   public:
    MixRules(const QuantMix& mix, const MixModel& model, std::span<const MixTensor> tensors, bool with_imatrix)
        : ftype_(mix.file_type), base_(mix.base), model_(model), with_imatrix_(with_imatrix) {
        tied_ = std::none_of(tensors.begin(), tensors.end(),
                             [](const MixTensor& t) { return t.name == "output.weight"; });
        n_attn_v_ = std::count_if(tensors.begin(), tensors.end(),
                                  [](const MixTensor& t) { return role_of(t.name) == Role::AttnV; });
        const auto& arch = model.architecture;
        falcon_ = arch == "falcon";
        seventy_b_ = std::any_of(kSeventyB.begin(), kSeventyB.end(), [&](const SeventyB& s) {
            return s.arch == arch && s.n_layer == model.n_layer && (!s.needs_gqa || model.n_head != model.n_head_kv);
        });
    }

    TypeId type_for(const MixTensor& t) {
        if (!is_converted(t)) return t.type;
        if (!is_quantized(base_)) return base_;
        return fallback(t, mixed(t));
    }

   private:
    uint32_t ftype_;
    TypeId base_;
    MixModel model_;
    bool with_imatrix_;
    bool tied_ = true;
    bool falcon_ = false;
    bool seventy_b_ = false;
    int64_t n_attn_v_ = 0;
    int64_t i_attn_v_ = 0;
    int64_t i_ffn_down_ = 0;

    static bool is_quantized(TypeId t) { return t != TypeId::F32 && t != TypeId::F16 && t != TypeId::BF16; }
    int64_t gqa() const { return model_.n_head_kv > 0 ? model_.n_head / model_.n_head_kv : 0; }
    bool eight_experts() const { return model_.n_expert == 8; }

    TypeId mixed(const MixTensor& t) {
        switch (role_of(t.name)) {
            case Role::Output: return output_head(t);
            case Role::TokenEmbd: return tied_ ? output_head(t) : base_;
            case Role::AttnV: return attn_v();
            case Role::AttnK: return eight_experts() ? TypeId::Q8_0 : base_;
            case Role::AttnOutput: return attn_output();
            case Role::FfnDown: return ffn_down(t);
            case Role::Other: return base_;
        }
        return base_;
    }

    TypeId output_head(const MixTensor& t) const {
        if (falcon_ || t.shape[0] % quant::type_info(base_).block_size != 0) return TypeId::Q8_0;
        return base_ == TypeId::Q8_0 ? TypeId::Q8_0 : TypeId::Q6_K;
    }

    TypeId attn_v() {
        const int64_t i = i_attn_v_++;
        TypeId t = base_;
        switch (ftype_) {
            case kQ2_K: t = gqa() >= 4 ? TypeId::Q4_K : TypeId::Q3_K; break;
            case kQ3_K_M: t = i < 2 ? TypeId::Q5_K : TypeId::Q4_K; break;
            case kQ3_K_L: t = TypeId::Q5_K; break;
            case kIQ4_NL:
            case kIQ4_XS:
                if (gqa() >= 4) t = TypeId::Q5_K;
                break;
            case kQ4_K_M:
            case kQ5_K_M:
                if (use_more_bits(i, n_attn_v_)) t = TypeId::Q6_K;
                break;
            case kQ4_K_S:
                if (i < 4) t = TypeId::Q5_K;
                break;
            default: break;
        }
        // A 70B model shares each attn_v among 8 heads, so more bits there cost little.
        if (seventy_b_ && (t == TypeId::Q3_K || t == TypeId::Q4_K)) t = TypeId::Q5_K;
        if (eight_experts()) t = TypeId::Q8_0;
        return t;
    }

    TypeId attn_output() const {
        if (falcon_) return ftype_ == kQ3_K_L ? TypeId::Q4_K : base_;
        if (eight_experts()) {
            switch (ftype_) {
                case kQ2_K:
                case kQ3_K_S:
                case kQ3_K_M:
                case kIQ4_NL:
                case kQ4_K_S:
                case kQ4_K_M:
                case kIQ4_XS: return TypeId::Q5_K;
                default: return base_;
            }
        }
        switch (ftype_) {
            case kQ2_K: return TypeId::Q3_K;
            case kQ3_K_M: return TypeId::Q4_K;
            case kQ3_K_L: return TypeId::Q5_K;
            default: return base_;
        }
    }

    // Dense models count ffn_down tensors in file order; expert models name the layer (their
    // expert tensors need not come one per layer).
    int64_t ffn_down_layer(const MixTensor& t) {
        const int64_t counted = i_ffn_down_++;
        if (std::max<int64_t>(1, model_.n_expert) == 1) return counted;
        const int64_t layer = layer_of(t.name);
        if (layer < 0) throw std::invalid_argument("cannot tell the layer of tensor " + t.name);
        if (layer >= model_.n_layer) {
            throw std::invalid_argument("tensor " + t.name + " is in layer " + std::to_string(layer) +
                                        " of a model with " + std::to_string(model_.n_layer));
        }
        return layer;
    }

    TypeId ffn_down(const MixTensor& t) {
        const int64_t i = ffn_down_layer(t);
        const int64_t n = model_.n_layer;
        switch (ftype_) {
            case kQ2_K: return TypeId::Q3_K;
            case kQ3_K_M:
                if (i < n / 16) return TypeId::Q5_K;
                return !falcon_ || use_more_bits(i, n) ? TypeId::Q4_K : TypeId::Q3_K;
            case kQ3_K_L: return falcon_ ? TypeId::Q4_K : TypeId::Q5_K;
            case kQ4_K_M:
                if (falcon_) return i < n / 16 ? TypeId::Q6_K : use_more_bits(i, n) ? TypeId::Q5_K : TypeId::Q4_K;
                return use_more_bits(i, n) ? TypeId::Q6_K : base_;
            case kIQ4_NL:
            case kIQ4_XS: return i < n / 8 && !with_imatrix_ ? TypeId::Q5_K : base_;
            case kQ5_K_M: return use_more_bits(i, n) ? TypeId::Q6_K : base_;
            case kQ4_K_S: return !falcon_ && i < n / 8 ? TypeId::Q5_K : base_;
            // The first ffn_down layers go wrong in Q4_0/Q5_0 even with an imatrix.
            case kQ4_0: return with_imatrix_ && i < n / 8 ? TypeId::Q4_1 : base_;
            case kQ5_0: return with_imatrix_ && i < n / 8 ? TypeId::Q5_1 : base_;
            default: return base_;
        }
    }

    // A row that does not divide into the chosen type's blocks takes the nearest type with
    // 32-element blocks, or F16 when not even those divide it.
    static TypeId fallback(const MixTensor& t, TypeId chosen) {
        const int64_t row = t.shape[0];
        if (row % quant::type_info(chosen).block_size == 0) return chosen;
        TypeId to = chosen;
        switch (chosen) {
            case TypeId::Q2_K:
            case TypeId::Q3_K: to = TypeId::Q4_0; break;
            case TypeId::Q4_K: to = TypeId::Q5_0; break;
            case TypeId::Q5_K: to = TypeId::Q5_1; break;
            case TypeId::Q6_K: to = TypeId::Q8_0; break;
            case TypeId::IQ4_XS: to = TypeId::IQ4_NL; break;
            default: break;  // already a 32-block type
        }
        return row % quant::type_info(to).block_size == 0 ? to : TypeId::F16;
    }
};

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
           });
}

}  // namespace

std::span<const QuantMix> quant_mixes() { return kMixes; }

const QuantMix* find_quant_mix(std::string_view name) {
    for (const QuantMix& m : kMixes) {
        if (iequals(m.name, name)) return &m;
    }
    return nullptr;
}

std::string quant_mix_names() {
    std::string out;
    for (const QuantMix& m : kMixes) out += (out.empty() ? "" : ", ") + std::string(m.name);
    return out;
}

std::vector<PlannedTensor> plan_quant_mix(const QuantMix& mix, const MixModel& model,
                                          std::span<const MixTensor> tensors, bool with_imatrix) {
    std::vector<size_t> order(tensors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const int64_t la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
        return la != lb ? la < lb : tensors[a].name < tensors[b].name;
    });
    MixRules rules(mix, model, tensors, with_imatrix);
    std::vector<PlannedTensor> plan;
    plan.reserve(order.size());
    for (size_t i : order) plan.push_back({i, rules.type_for(tensors[i])});
    return plan;
}

}  // namespace deskside::models
