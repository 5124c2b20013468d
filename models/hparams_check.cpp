#include "models/hparams_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

#include "models/family.h"

namespace deskside::models {
namespace {

// A hyper-parameter's name in each format: the GGUF key below "<architecture>."
// and the config.json field it is read from.
struct Field {
  std::string_view gguf, hf;
};
constexpr Field kBlockCount{"block_count", "num_hidden_layers"};
constexpr Field kEmbedding{"embedding_length", "hidden_size"};
constexpr Field kHeads{"attention.head_count", "num_attention_heads"};
constexpr Field kHeadsKv{"attention.head_count_kv", "num_key_value_heads"};
constexpr Field kKeyLength{"attention.key_length", "head_dim"};
constexpr Field kValueLength{"attention.value_length", "head_dim"};
constexpr Field kFfn{"feed_forward_length", "intermediate_size"};
constexpr Field kContext{"context_length", "max_position_embeddings"};
constexpr Field kExperts{"expert_count", "num_experts"};
constexpr Field kExpertsUsed{"expert_used_count", "num_experts_per_tok"};
constexpr Field kExpertFfn{"expert_feed_forward_length",
                           "moe_intermediate_size"};
constexpr Field kRopeDims{"rope.dimension_count", "partial_rotary_factor"};
constexpr Field kNormEps{"attention.layer_norm_rms_epsilon", "rms_norm_eps"};
constexpr Field kRopeBase{"rope.freq_base", "rope_theta"};
constexpr Field kRopeBaseSwa{"rope.freq_base_swa", "rope_local_base_freq"};
constexpr Field kRopeFactor{"rope.scaling.factor", "rope_scaling.factor"};
constexpr Field kRopeAttnFactor{"rope.scaling.attn_factor",
                                "rope_scaling.attention_factor"};
constexpr Field kRopeOrigCtx{"rope.scaling.original_context_length",
                             "rope_scaling.original_max_position_embeddings"};
constexpr Field kSlidingWindow{"attention.sliding_window", "sliding_window"};
constexpr Field kSlidingPattern{"attention.sliding_window_pattern",
                                "sliding_window_pattern"};

std::string shape_text(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The layer index of "blk.<il>.<name>", or -1 (also for an index too long to be
// one).
int64_t layer_of(const std::string &name) {
  if (name.rfind("blk.", 0) != 0)
    return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot > 4 + 9)
    return -1;
  int64_t il = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9')
      return -1;
    il = il * 10 + (name[i] - '0');
  }
  return il;
}

class Checker {
public:
  explicit Checker(const ModelInfo &m) : m_(m), hp_(m.hparams) {}

  std::string name(const Field &f) const {
    if (m_.format == "gguf")
      return hp_.architecture + "." + std::string(f.gguf);
    return "config.json " + std::string(f.hf);
  }

  [[noreturn]] void fail(const std::string &what) const {
    throw std::runtime_error(m_.path + ": " + what);
  }
  [[noreturn]] void fail(const Field &f, const std::string &value,
                         const std::string &why) const {
    fail(name(f) + " is " + value + ": " + why);
  }

  void range(const Field &f, int64_t v, int64_t lo, int64_t hi,
             const std::string &what) const {
    if (v >= lo && v <= hi)
      return;
    fail(f, std::to_string(v),
         what + " must be " +
             (lo == hi ? std::to_string(lo)
                       : "between " + std::to_string(lo) + " and " +
                             std::to_string(hi)));
  }

  void positive_real(const Field &f, double v, bool zero_ok) const {
    if (std::isfinite(v) && (v > 0 || (zero_ok && v == 0)))
      return;
    fail(f, number_text(v),
         zero_ok ? "must be a finite number, 0 or more"
                 : "must be a finite positive number");
  }

  // Every hyper-parameter within its range and consistent with the others.
  void ranges(bool has_tensors) const {
    range(kBlockCount, hp_.n_layer, has_tensors ? 1 : 0, kMaxLayers,
          "the number of layers");
    range(kEmbedding, hp_.n_embd, has_tensors ? 1 : 0, kMaxModelDim,
          "the embedding width");
    range(kHeads, hp_.n_head, has_tensors ? 1 : 0, kMaxModelDim,
          "the number of attention heads");
    range(kHeadsKv, hp_.n_head_kv, hp_.n_head > 0 ? 1 : 0,
          std::max<int64_t>(hp_.n_head, 0),
          "the number of key/value heads (at most " + name(kHeads) + ")");
    if (hp_.n_head_kv > 0 && hp_.n_head % hp_.n_head_kv != 0)
      fail(kHeadsKv, std::to_string(hp_.n_head_kv),
           "it must divide " + name(kHeads) + " (" +
               std::to_string(hp_.n_head) + ") for grouped-query attention");
    per_layer(kHeads, hp_.n_head_layers, 1, kMaxModelDim);
    per_layer(kHeadsKv, hp_.n_head_kv_layers, 1, kMaxModelDim);
    per_layer(kFfn, hp_.n_ff_layers, 0, kMaxModelDim);
    for (size_t il = 0;
         il < hp_.n_head_layers.size() && il < hp_.n_head_kv_layers.size();
         ++il)
      if (hp_.n_head_layers[il] % hp_.n_head_kv_layers[il] != 0)
        fail(kHeadsKv,
             std::to_string(hp_.n_head_kv_layers[il]) + " in layer " +
                 std::to_string(il),
             "it must divide that layer's " + name(kHeads) + " (" +
                 std::to_string(hp_.n_head_layers[il]) + ")");
    const int64_t need_head = hp_.n_head > 0 ? 1 : 0;
    range(kKeyLength, hp_.head_dim, need_head, kMaxModelDim,
          "the key/query head size (" + name(kEmbedding) + " / " +
              name(kHeads) + " when absent)");
    range(kValueLength, hp_.head_dim_v, need_head, kMaxModelDim,
          "the value head size");
    range(kFfn, hp_.n_ff, 0, kMaxModelDim, "the feed-forward width");
    range(kContext, hp_.n_ctx_train, has_tensors ? 1 : 0, kMaxContext,
          "the training context");
    range(kExperts, hp_.n_expert, 0, kMaxExperts, "the number of experts");
    range(kExpertsUsed, hp_.n_expert_used, hp_.n_expert > 0 ? 1 : 0,
          hp_.n_expert,
          "the experts each token uses (at most " + name(kExperts) + ")");
    range(kExpertFfn, hp_.n_ff_exp, 0, kMaxModelDim,
          "an expert's feed-forward width");
    if (hp_.head_dim > 0 &&
        (hp_.n_rot <= 0 || hp_.n_rot > hp_.head_dim || hp_.n_rot % 2 != 0))
      fail(kRopeDims, std::to_string(hp_.n_rot),
           "RoPE rotates an even number of dimensions, at most the head size " +
               std::to_string(hp_.head_dim));
    range(kSlidingWindow, hp_.sliding_window, 0, kMaxContext,
          "the sliding window");
    range(kSlidingPattern, hp_.sliding_window_pattern, 0, kMaxLayers,
          "the sliding-window pattern");
    positive_real(kNormEps, hp_.norm_eps, true);
    positive_real(kRopeBase, hp_.rope_freq_base, false);
    positive_real(kRopeBaseSwa, hp_.rope_freq_base_swa, true);
    positive_real(kRopeFactor, hp_.rope_scaling_factor, false);
    positive_real(kRopeAttnFactor, hp_.rope_attn_factor, false);
    if (hp_.rope_scaling == RopeScaling::Yarn ||
        hp_.rope_scaling == RopeScaling::Llama3)
      range(kRopeOrigCtx, hp_.rope_orig_ctx, 1, kMaxContext,
            "the context RoPE scaling starts from");
  }

  void per_layer(const Field &f, const std::vector<int64_t> &values, int64_t lo,
                 int64_t hi) const {
    if (values.empty())
      return;
    if (static_cast<int64_t>(values.size()) != hp_.n_layer)
      fail(f, "a list of " + std::to_string(values.size()) + " values",
           "it must give one per layer (" + name(kBlockCount) + " is " +
               std::to_string(hp_.n_layer) + ")");
    for (size_t il = 0; il < values.size(); ++il)
      if (values[il] < lo || values[il] > hi)
        fail(f, std::to_string(values[il]) + " in layer " + std::to_string(il),
             "must be between " + std::to_string(lo) + " and " +
                 std::to_string(hi));
  }

  // The tensor table against the hyper-parameters: the layers it has and the
  // embedding table.
  void tensors(int64_t tokenizer_vocab) const {
    int64_t last_layer = -1;
    for (const Tensor &t : m_.tensors) {
      const int64_t il = layer_of(t.name);
      if (il >= hp_.n_layer)
        fail("tensor '" + t.name + "' is in layer " + std::to_string(il) +
             " but " + name(kBlockCount) + " is " +
             std::to_string(hp_.n_layer));
      last_layer = std::max(last_layer, il);
    }
    if (last_layer + 1 < hp_.n_layer)
      fail(kBlockCount, std::to_string(hp_.n_layer),
           last_layer < 0 ? "the file has no layer tensors (blk.N.*)"
                          : "the file's layer tensors stop at blk." +
                                std::to_string(last_layer) + ".*");
    const Tensor *emb = m_.find("token_embd.weight");
    if (!emb)
      return;
    if (emb->shape.size() != 2 || emb->shape[0] != hp_.n_embd)
      fail(kEmbedding, std::to_string(hp_.n_embd),
           "tensor 'token_embd.weight' is " + shape_text(emb->shape) +
               ", which is not [" + name(kEmbedding) + ", vocabulary]");
    if (tokenizer_vocab > emb->shape[1])
      fail("the vocabulary has " + std::to_string(tokenizer_vocab) +
           " tokens but tensor 'token_embd.weight' has " +
           std::to_string(emb->shape[1]) + " rows: ids from " +
           std::to_string(emb->shape[1]) + " on could not be embedded");
  }

  // Every tensor of the family the shape the hyper-parameters give it, naming
  // the values that shape comes from (the engine checks the same when it places
  // them, after sizing buffers).
  void shapes(const Family &family) const {
    for (const TensorSpec &spec : family.tensors) {
      const bool per_layer = is_layer_role(spec.role);
      const std::vector<int64_t> want = expected_shape(spec.role, hp_);
      for (int64_t il = 0; il < (per_layer ? hp_.n_layer : 1); ++il) {
        const std::string tensor_name =
            per_layer
                ? "blk." + std::to_string(il) + "." + std::string(spec.name)
                : std::string(spec.name);
        const Tensor *t = m_.find(tensor_name);
        if (!t || t->shape == want)
          continue;
        fail("tensor '" + tensor_name + "' is " + shape_text(t->shape) +
             " but the hyper-parameters make it " + shape_text(want) + " (" +
             values_text() + ")");
      }
    }
  }

  std::string values_text() const {
    std::string out;
    const auto add = [&](const Field &f, int64_t v) {
      out += (out.empty() ? "" : ", ") + name(f) + " " + std::to_string(v);
    };
    add(kEmbedding, hp_.n_embd);
    add(kHeads, hp_.n_head);
    add(kHeadsKv, hp_.n_head_kv);
    add(kKeyLength, hp_.head_dim);
    add(kValueLength, hp_.head_dim_v);
    add(kFfn, hp_.n_ff);
    if (hp_.n_expert > 0) {
      add(kExperts, hp_.n_expert);
      add(kExpertFfn, hp_.n_ff_exp);
    }
    add(kRopeDims, hp_.n_rot);
    return out + ", vocabulary rows " + std::to_string(hp_.n_vocab);
  }

private:
  const ModelInfo &m_;
  const Hparams &hp_;
};

} // namespace

void check_hparams(const ModelInfo &info, int64_t tokenizer_vocab) {
  if (info.hparams.architecture.empty())
    return;
  const Checker check(info);
  const bool has_tensors = !info.tensors.empty();
  check.ranges(has_tensors);
  if (!has_tensors)
    return;
  check.tensors(tokenizer_vocab);
  if (const Family *family = find_family(info.hparams.architecture))
    check.shapes(*family);
}

} // namespace deskside::models
