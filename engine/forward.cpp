// The forward pass, written once for every family in engine/arch.h.
//
// Per step, for n tokens (activations [n_embd, n] F32, one row per token):
//   x = embed(tokens) (* sqrt(n_embd))
//   per layer: h = norm(x); q, k, v = W h (+ b); (q, k per-head norms); rope(q, k);
//              k, v -> cache; a = attention(q, cache); o = Wo a (post norm); x += o
//              h = norm(x); f = act(Wg h) * (Wu h); o = Wd f (post norm); x += o
//   logits = Wout norm(x) for the tokens that want them.
// ref: llama2.c run.c forward() for the Llama block; the family files for their differences.
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include "engine/model.h"

namespace deskside::engine {

using backends::Tensor;
using quant::TypeId;

namespace {
// Rows of logits computed per output matmul: bounds the scratch for large vocabularies.
constexpr int64_t kLogitRowsPerPass = 32;

backends::RopeScalingType rope_scaling_type(models::RopeScaling s) {
    switch (s) {
        case models::RopeScaling::None: return backends::RopeScalingType::None;
        case models::RopeScaling::Linear: return backends::RopeScalingType::Linear;
        case models::RopeScaling::Yarn: return backends::RopeScalingType::Yarn;
        case models::RopeScaling::Llama3: return backends::RopeScalingType::Llama3;
    }
    return backends::RopeScalingType::None;
}
}  // namespace

// Activations for up to n_batch tokens, allocated once per model.
struct Model::Scratch {
    std::unique_ptr<backends::Buffer> buffer;
    Tensor x;       // [n_embd, n_batch] residual stream
    Tensor h;       // [n_embd, n_batch] normed input of a sub-block
    Tensor q;       // [n_head * head_dim, n_batch]
    Tensor k;       // [n_head_kv * head_dim, n_batch]
    Tensor v;       // [n_head_kv * head_dim_v, n_batch]
    Tensor attn;    // [n_head * head_dim_v, n_batch]
    Tensor o;       // [n_embd, n_batch] sub-block output
    Tensor gate;    // [n_ff, n_batch]
    Tensor up;      // [n_ff, n_batch]
    Tensor sel;     // [n_embd, kLogitRowsPerPass] rows that want logits
    Tensor logits;  // [n_vocab, kLogitRowsPerPass]
    // Host-side per-step inputs, kept to avoid reallocation.
    std::vector<int32_t> tokens, positions, rows, wanted;
    std::vector<backends::AttentionQuery> queries;
};

Model::Model(models::ModelInfo info, backends::Backend& backend, const EngineOptions& options)
    : info_(std::move(info)),
      backend_(backend),
      arch_(arch_spec(info_.hparams.architecture)),
      options_(options),
      weights_(info_, arch_, backend),
      cache_(backend, info_.hparams, options.cache),
      scratch_(std::make_unique<Scratch>()) {
    const models::Hparams& hp = info_.hparams;
    if (options_.n_batch <= 0) throw std::invalid_argument("n_batch must be positive");
    const int64_t nb = options_.n_batch;
    struct Slot {
        Tensor* t;
        int64_t ne0, ne1;
    };
    Scratch& s = *scratch_;
    const Slot slots[] = {
        {&s.x, hp.n_embd, nb},
        {&s.h, hp.n_embd, nb},
        {&s.q, hp.n_head * hp.head_dim, nb},
        {&s.k, hp.n_head_kv * hp.head_dim, nb},
        {&s.v, hp.n_head_kv * hp.head_dim_v, nb},
        {&s.attn, hp.n_head * hp.head_dim_v, nb},
        {&s.o, hp.n_embd, nb},
        {&s.gate, hp.n_ff, nb},
        {&s.up, hp.n_ff, nb},
        {&s.sel, hp.n_embd, kLogitRowsPerPass},
        {&s.logits, hp.n_vocab, kLogitRowsPerPass},
    };
    constexpr size_t kAlign = 64;
    size_t total = 0;
    for (const Slot& slot : slots) total += (slot.ne0 * slot.ne1 * sizeof(float) + kAlign - 1) / kAlign * kAlign;
    s.buffer = backend.alloc(total);
    size_t offset = 0;
    for (const Slot& slot : slots) {
        *slot.t = backends::make_tensor(s.buffer.get(), offset, TypeId::F32, slot.ne0, slot.ne1);
        offset += (slot.ne0 * slot.ne1 * sizeof(float) + kAlign - 1) / kAlign * kAlign;
    }
}

Model::~Model() = default;

backends::RopeParams Model::rope_params(int64_t il) const {
    const models::Hparams& hp = info_.hparams;
    const bool swa = hp.layer_is_swa(il);
    backends::RopeParams p;
    p.head_dim = hp.head_dim;
    p.n_rot = hp.n_rot;
    p.neox = hp.rope_neox;
    p.freq_base = static_cast<float>(swa && hp.rope_freq_base_swa > 0 ? hp.rope_freq_base_swa : hp.rope_freq_base);
    const bool unscaled = swa && arch_.swa_layers_unscaled_rope;
    p.scaling = unscaled ? backends::RopeScalingType::None : rope_scaling_type(hp.rope_scaling);
    p.scaling_factor = static_cast<float>(hp.rope_scaling_factor);
    p.orig_ctx = hp.rope_orig_ctx;
    p.llama3_low_freq_factor = static_cast<float>(hp.rope_llama3_low_freq_factor);
    p.llama3_high_freq_factor = static_cast<float>(hp.rope_llama3_high_freq_factor);
    if (!unscaled) p.freq_factors = weights_.rope_freqs();
    return p;
}

void Model::validate(std::span<const BatchToken> batch) const {
    std::map<int32_t, int64_t> next_pos;
    for (size_t i = 0; i < batch.size(); ++i) {
        const BatchToken& t = batch[i];
        const std::string where = "batch token " + std::to_string(i) + ": ";
        if (t.token < 0 || t.token >= n_vocab())
            throw std::invalid_argument(where + "token id " + std::to_string(t.token) + " outside [0, " +
                                        std::to_string(n_vocab()) + ")");
        if (t.seq < 0) throw std::invalid_argument(where + "negative sequence id");
        auto [it, fresh] = next_pos.try_emplace(t.seq, cache_.length(t.seq));
        if (t.pos != it->second)
            throw std::invalid_argument(where + "sequence " + std::to_string(t.seq) + " expects position " +
                                        std::to_string(it->second) + ", got " + std::to_string(t.pos));
        ++it->second;
    }
}

std::span<const float> Model::decode(std::span<const BatchToken> batch) {
    validate(batch);
    logits_.clear();
    for (size_t first = 0; first < batch.size(); first += options_.n_batch) {
        const size_t n = std::min<size_t>(options_.n_batch, batch.size() - first);
        step(batch.subspan(first, n));
    }
    return logits_;
}

void Model::step(std::span<const BatchToken> batch) {
    const models::Hparams& hp = info_.hparams;
    Scratch& s = *scratch_;
    const int64_t n = static_cast<int64_t>(batch.size());
    s.tokens.clear();
    s.positions.clear();
    s.rows.clear();
    s.wanted.clear();
    s.queries.clear();
    for (const BatchToken& t : batch) cache_.reserve(t.seq, t.pos + 1);
    for (int64_t i = 0; i < n; ++i) {
        const BatchToken& t = batch[i];
        s.tokens.push_back(t.token);
        s.positions.push_back(t.pos);
        s.rows.push_back(cache_.row(t.seq, t.pos));
        s.queries.push_back({t.pos, cache_.blocks(t.seq)});
        if (t.want_logits) s.wanted.push_back(static_cast<int32_t>(i));
    }

    const Tensor x = s.x.rows(0, n);
    backend_.get_rows(weights_.get(Role::TokenEmbd), s.tokens, x);
    if (arch_.scale_embeddings) backend_.scale(x, std::sqrt(static_cast<float>(hp.n_embd)), x);
    for (int64_t il = 0; il < hp.n_layer; ++il) layer(il, n, s.positions, s.queries);

    const float eps = static_cast<float>(hp.norm_eps);
    for (size_t first = 0; first < s.wanted.size(); first += kLogitRowsPerPass) {
        const int64_t m = std::min<int64_t>(kLogitRowsPerPass, static_cast<int64_t>(s.wanted.size() - first));
        const Tensor sel = s.sel.rows(0, m);
        const Tensor logits = s.logits.rows(0, m);
        backend_.get_rows(x, std::span(s.wanted).subspan(first, m), sel);
        backend_.rms_norm(sel, weights_.get(Role::OutputNorm), eps, sel);
        backend_.matmul(weights_.get(Role::Output), sel, logits);
        const size_t old = logits_.size();
        logits_.resize(old + m * hp.n_vocab);
        backend_.download(*logits.buffer, logits.offset, logits_.data() + old, m * hp.n_vocab * sizeof(float));
    }
}

void Model::layer(int64_t il, int64_t n, std::span<const int32_t> positions,
                  std::span<const backends::AttentionQuery> queries) {
    const models::Hparams& hp = info_.hparams;
    Scratch& s = *scratch_;
    const auto w = [&](Role r) -> const Tensor& { return weights_.layer(il, r); };
    const float eps = static_cast<float>(hp.norm_eps);
    const Tensor x = s.x.rows(0, n), h = s.h.rows(0, n), o = s.o.rows(0, n);
    const Tensor q = s.q.rows(0, n), k = s.k.rows(0, n), v = s.v.rows(0, n), attn = s.attn.rows(0, n);

    // Attention block.
    backend_.rms_norm(x, w(Role::AttnNorm), eps, h);
    backend_.matmul(w(Role::AttnQ), h, q);
    backend_.matmul(w(Role::AttnK), h, k);
    backend_.matmul(w(Role::AttnV), h, v);
    if (!w(Role::AttnQBias).empty()) backend_.add(q, w(Role::AttnQBias), q);
    if (!w(Role::AttnKBias).empty()) backend_.add(k, w(Role::AttnKBias), k);
    if (!w(Role::AttnVBias).empty()) backend_.add(v, w(Role::AttnVBias), v);
    if (!w(Role::AttnQNorm).empty()) backend_.rms_norm(q.reshape(hp.head_dim), w(Role::AttnQNorm), eps, q.reshape(hp.head_dim));
    if (!w(Role::AttnKNorm).empty()) backend_.rms_norm(k.reshape(hp.head_dim), w(Role::AttnKNorm), eps, k.reshape(hp.head_dim));
    backends::RopeParams rp = rope_params(il);
    rp.n_head = hp.n_head;
    backend_.rope(q, positions, rp);
    rp.n_head = hp.n_head_kv;
    backend_.rope(k, positions, rp);

    backends::AttentionParams ap;
    ap.n_head = hp.n_head;
    ap.n_head_kv = hp.n_head_kv;
    ap.head_dim = hp.head_dim;
    ap.head_dim_v = hp.head_dim_v;
    ap.scale = arch_.attention_scale(hp);
    ap.window = hp.layer_is_swa(il) ? hp.sliding_window : 0;
    if (arch_.prescale_queries) {
        backend_.scale(q, ap.scale, q);
        ap.scale = 1.0f;
    }
    const backends::KvCacheView kv = cache_.layer(il);
    backend_.set_rows(k, kv.k, scratch_->rows);
    backend_.set_rows(v, kv.v, scratch_->rows);
    backend_.attention(q, kv, queries, ap, attn);
    backend_.matmul(w(Role::AttnOutput), attn, o);
    if (!w(Role::PostAttnNorm).empty()) backend_.rms_norm(o, w(Role::PostAttnNorm), eps, o);
    backend_.add(x, o, x);

    // Feed-forward block (gated: SwiGLU or GeGLU).
    const Tensor gate = s.gate.rows(0, n), up = s.up.rows(0, n);
    backend_.rms_norm(x, w(Role::FfnNorm), eps, h);
    backend_.matmul(w(Role::FfnGate), h, gate);
    backend_.matmul(w(Role::FfnUp), h, up);
    if (arch_.activation == FfnActivation::GeluTanh) backend_.gelu(gate, gate);
    else backend_.silu(gate, gate);
    backend_.mul(gate, up, gate);
    backend_.matmul(w(Role::FfnDown), gate, o);
    if (!w(Role::PostFfnNorm).empty()) backend_.rms_norm(o, w(Role::PostFfnNorm), eps, o);
    backend_.add(x, o, x);
}

}  // namespace deskside::engine
