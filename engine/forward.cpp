// The forward pass, written once for every family in engine/arch.h.
//
// Per step, for n tokens (activations [n_embd, n] F32, one row per token):
//   x = embed(tokens) (* sqrt(n_embd))
//   per layer: h = norm(x); q, k, v = W h (+ b); (q, k per-head norms); rope(q, k);
//              k, v -> cache; a = attention(q, cache); o = Wo a (post norm); x += o
//              h = norm(x); f = act(Wg h) * (Wu h); o = Wd f (post norm); x += o
//   logits = Wout norm(x) for the tokens that want them (or norm(x) itself: Model::embed).
// The final layer computes K and V for every token (later steps attend to them) but the rest
// (q, attention, Wo, the FFN) only for the tokens that want logits, as llama.cpp does: a prompt
// chunk wants one row, so that is 1/n_layer of a prompt's work saved. Ops compute each row the
// same whatever the other rows (DESIGN.md key decision 5), so the logits keep their bits.
// ref: llama2.c run.c forward() for the Llama block; the family files for their differences.
//
// The step's index arguments (token ids, positions, cache rows, attention block tables) are built
// once on the host and uploaded once per device (engine/step_args.h); the ops of a device's share
// of the step then run between its begin_step() and end_step() and read nothing from the host.
//
// Split across devices, each device (a Stage) runs its layers on its own scratch; between stages
// the residual stream x of the step's n tokens crosses once (Backend::copy_to: directly where the
// devices can, through host memory otherwise). Every op sees the same inputs as on one device,
// so the logits are the same bits when the devices compute alike.
//
// Split across processes (--split-hosts, engine/stage_link.h), the devices list has entries for
// the other ranks' layers: x crosses to or from them through host memory and the link, and the
// last rank sends the outputs to rank 0, whose calls every rank repeats.
//
// Layer matmuls go through Model::matmul / matmul_id (engine/activation_observer.cpp), which show
// their input to an ActivationObserver when one is set (`deskside imatrix`).
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/scratch.h"
#include "engine/step_args.h"

namespace deskside::engine {

using backends::Tensor;

namespace {

backends::RopeScalingType rope_scaling_type(models::RopeScaling s) {
    switch (s) {
        case models::RopeScaling::None: return backends::RopeScalingType::None;
        case models::RopeScaling::Linear: return backends::RopeScalingType::Linear;
        case models::RopeScaling::Yarn: return backends::RopeScalingType::Yarn;
        case models::RopeScaling::Llama3: return backends::RopeScalingType::Llama3;
    }
    return backends::RopeScalingType::None;
}

// Layer end the one-backend constructor passes before the model's layer count is known.
constexpr int64_t kAllLayers = -1;

// The devices with their layer ranges resolved, after checking that each can run what is placed
// on it (before any weight is loaded).
std::vector<DeviceLayers> resolve_devices(std::vector<DeviceLayers> devices, const models::ModelInfo& info,
                                          const ArchSpec& arch, const EngineOptions& options) {
    if (devices.size() == 1 && devices[0].layer_end == kAllLayers) devices[0].layer_end = info.hparams.n_layer;
    const models::Hparams& hp = info.hparams;
    if (arch.moe && (hp.n_expert <= 0 || hp.n_expert_used <= 0 || hp.n_expert_used > hp.n_expert || hp.n_ff_exp <= 0))
        throw std::runtime_error(info.path + ": a " + hp.architecture + " model needs expert_count, expert_used_count (1.." +
                                 "expert_count) and expert_feed_forward_length; the file has " + std::to_string(hp.n_expert) +
                                 ", " + std::to_string(hp.n_expert_used) + ", " + std::to_string(hp.n_ff_exp));
    if (!arch.moe && options.experts.host && options.experts.n_layers > 0)
        throw std::invalid_argument(info.path + ": --cpu-moe / --n-cpu-moe apply to mixture-of-experts models; " +
                                    hp.architecture + " has no experts");
    const auto remote = [](const DeviceLayers& d) { return d.remote(); };
    if (std::any_of(devices.begin(), devices.end(), remote) && !options.hosts)
        throw std::invalid_argument("layers on other hosts but no link to them");
    check_supported(info, arch, devices, options.cache, options.experts);
    return devices;
}

// The frequency divisors RoPE applies: LongRoPE's short or long factors by the context the model
// runs with (llama.cpp: long beyond rope.scaling.original_context_length), else rope_freqs.
std::vector<float> rope_factors(const ArchSpec& arch, const models::Hparams& hp, const ModelWeights& w, int64_t n_ctx) {
    if (arch.long_rope) {
        const bool long_ctx = hp.rope_orig_ctx > 0 && n_ctx > hp.rope_orig_ctx;
        const std::vector<float>& f = w.host_floats(long_ctx ? Role::RopeFactorsLong : Role::RopeFactorsShort);
        if (!f.empty()) return f;
    }
    return w.host_floats(Role::RopeFreqs);
}

}  // namespace

// One device's share of a step.
struct Model::Stage {
    backends::Backend* backend;
    int64_t layer_begin, layer_end;
    std::unique_ptr<Scratch> scratch;
    std::unique_ptr<StepArgs> args;  // this step's index arguments on this device
};

// Host-side per-step inputs, shared by every stage and kept to avoid reallocation.
struct Model::StepInputs {
    StepWords words;
};

Model::Model(models::ModelInfo info, backends::Backend& backend, const EngineOptions& options)
    : Model(std::move(info), std::vector<DeviceLayers>{{&backend, 0, kAllLayers}}, options) {}

Model::Model(models::ModelInfo info, std::vector<DeviceLayers> devices, const EngineOptions& options)
    : info_(std::move(info)),
      arch_(arch_spec(info_.hparams.architecture)),
      devices_(resolve_devices(std::move(devices), info_, arch_, options)),
      options_(options),
      weights_(info_, arch_, devices_, options.experts, options.progress),
      cache_(devices_, info_.hparams, options.cache),
      inputs_(std::make_unique<StepInputs>()) {
    if (options_.n_batch <= 0) throw std::invalid_argument("n_batch must be positive");
    options_.progress = nullptr;  // its captures belong to the loading front end
    rope_factors_ = rope_factors(arch_, info_.hparams, weights_, cache_.n_positions());
    if (options_.experts.host && options_.experts.n_layers > 0)
        expert_scratch_ = std::make_unique<Scratch>(*options_.experts.host, info_.hparams, options_.n_batch, false);
    for (size_t i = 0; i < devices_.size(); ++i) {
        const DeviceLayers& d = devices_[i];
        if (d.remote()) continue;
        const bool last = i + 1 == devices_.size();
        stages_.push_back({d.backend, d.layer_begin, d.layer_end,
                           std::make_unique<Scratch>(*d.backend, info_.hparams, options_.n_batch, last),
                           std::make_unique<StepArgs>(*d.backend)});
    }
}

Model::~Model() {
    // The other ranks repeat this model's calls until it goes (engine/stage_link.h).
    try {
        announce({StageOp::Stop, 0, 0, 0, {}});
    } catch (const std::exception&) {
        // A link that failed already: mpirun ends the ranks when this one exits.
    }
}

bool Model::announcing() const { return options_.hosts && options_.hosts->rank() == 0; }

void Model::announce(const StageCommand& c) {
    if (announcing()) options_.hosts->send_command(encode_command(c));
}

void Model::truncate(int32_t seq, int64_t n_pos) {
    if (announcing()) announce({StageOp::Truncate, seq, 0, n_pos, {}});
    cache_.truncate(seq, n_pos);
}

void Model::fork(int32_t src, int32_t dst, int64_t n_pos) {
    if (announcing()) announce({StageOp::Fork, src, dst, n_pos, {}});
    cache_.fork(src, dst, n_pos);
}

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
    if (!unscaled) p.freq_factors = rope_factors_;
    p.attn_factor = static_cast<float>(hp.rope_attn_factor);
    p.n_ctx = cache_.n_positions();
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

std::span<const float> Model::decode(std::span<const BatchToken> batch) { return run(batch, Output::Logits); }

std::span<const float> Model::embed(std::span<const BatchToken> batch) { return run(batch, Output::Hidden); }

std::span<const float> Model::run(std::span<const BatchToken> batch, Output output) {
    validate(batch);
    // After validation: a call that fails it is not sent, so the other ranks see only good batches.
    if (announcing())
        announce({output == Output::Logits ? StageOp::Decode : StageOp::Embed, 0, 0, 0, {batch.begin(), batch.end()}});
    logits_.clear();
    for (size_t first = 0; first < batch.size(); first += options_.n_batch) {
        const size_t n = std::min<size_t>(options_.n_batch, batch.size() - first);
        step(batch.subspan(first, n), output);
    }
    return logits_;
}

void Model::step(std::span<const BatchToken> batch, Output output) {
    const models::Hparams& hp = info_.hparams;
    const int64_t n = static_cast<int64_t>(batch.size());
    for (const BatchToken& t : batch) cache_.reserve(t.seq, t.pos + 1);
    StepWords& words = inputs_->words;
    words.build(batch, cache_);
    for (Stage& stage : stages_) stage.args->upload(words);

    Stage* prev = nullptr;  // the local stage holding x, or none when x is on another host
    size_t si = 0;
    for (size_t di = 0; di < devices_.size(); ++di) {
        const DeviceLayers& d = devices_[di];
        if (d.remote()) {
            if (prev) send_x(*prev, d.host, n);
            prev = nullptr;
            continue;
        }
        Stage& stage = stages_[si++];
        if (di == 0) {
            const Tensor x0 = stage.scratch->x.rows(0, n);
            stage.backend->begin_step();
            stage.backend->get_rows(weights_.get(Role::TokenEmbd), stage.args->tokens, x0);
            if (arch_.scale_embeddings) stage.backend->scale(x0, std::sqrt(static_cast<float>(hp.n_embd)), x0);
        } else if (prev) {
            prev->backend->end_step();
            cross(*prev, stage, n);
            stage.backend->begin_step();
        } else {
            receive_x(devices_[di - 1].host, stage, n);
            stage.backend->begin_step();
        }
        const bool last_stage = di + 1 == devices_.size();
        for (int64_t il = stage.layer_begin; il < stage.layer_end; ++il)
            layer(stage, il, n, last_stage && il + 1 == stage.layer_end);
        prev = &stage;
    }

    const int64_t n_wanted = words.layout.m;
    if (!prev) {  // another host runs the final layers: rank 0 gets their outputs
        if (options_.hosts->rank() != 0) return;
        const int64_t width = output == Output::Hidden ? hp.n_embd : n_vocab();
        const size_t old = logits_.size();
        logits_.resize(old + static_cast<size_t>(n_wanted * width));
        options_.hosts->receive(devices_.back().host, std::span<float>(logits_).subspan(old));
        return;
    }
    // The rows that want logits are x's first rows now (the final layer compacted them).
    Stage& last = *prev;
    backends::Backend& be = *last.backend;
    last.backend->end_step();
    const Scratch& s = *last.scratch;
    const size_t step_begin = logits_.size();
    const float eps = static_cast<float>(hp.norm_eps);
    for (int64_t first_row = 0; first_row < n_wanted; first_row += kLogitRowsPerPass) {
        const int64_t m = std::min<int64_t>(kLogitRowsPerPass, n_wanted - first_row);
        const Tensor sel = s.sel.rows(0, m);
        const Tensor logits = s.logits.rows(0, m);
        be.rms_norm(s.x.rows(first_row, m), weights_.get(Role::OutputNorm), eps, sel);
        const bool hidden = output == Output::Hidden;
        if (!hidden) be.matmul(weights_.get(Role::Output), sel, logits);
        const Tensor& out = hidden ? sel : logits;
        const size_t old = logits_.size(), count = static_cast<size_t>(m * out.ne0);
        logits_.resize(old + count);
        be.download(*out.buffer, out.offset, logits_.data() + old, count * sizeof(float));
    }
    if (options_.hosts && options_.hosts->rank() != 0)
        options_.hosts->send(0, std::span<const float>(logits_).subspan(step_begin));
}

void Model::send_x(const Stage& from, int host, int64_t n) {
    from.backend->end_step();
    const Tensor x = from.scratch->x.rows(0, n);
    hop_.resize(static_cast<size_t>(n) * x.row_stride / sizeof(float));
    from.backend->download(*x.buffer, x.offset, hop_.data(), hop_.size() * sizeof(float));
    options_.hosts->send(host, hop_);
}

void Model::receive_x(int host, Stage& to, int64_t n) {
    const Tensor x = to.scratch->x.rows(0, n);
    hop_.resize(static_cast<size_t>(n) * x.row_stride / sizeof(float));
    options_.hosts->receive(host, hop_);
    to.backend->upload(*x.buffer, x.offset, hop_.data(), hop_.size() * sizeof(float));
}

void Model::cross(const Stage& from, Stage& to, int64_t n) {
    // The residual stream is the only state a layer passes on; scratch rows are contiguous, so
    // the step's n tokens are one block of bytes.
    const Tensor src = from.scratch->x.rows(0, n), dst = to.scratch->x.rows(0, n);
    const size_t bytes = static_cast<size_t>(n) * src.row_stride;
    from.backend->copy_to(*src.buffer, src.offset, *to.backend, *dst.buffer, dst.offset, bytes);
}

void Model::layer(Stage& stage, int64_t il, int64_t n, bool last) {
    const models::Hparams& hp = info_.hparams;
    backends::Backend& be = *stage.backend;
    const Scratch& s = *stage.scratch;
    const StepArgs& in = *stage.args;
    const StepLayout& layout = inputs_->words.layout;
    const auto w = [&](Role r) -> const Tensor& { return weights_.layer(il, r); };
    const float eps = static_cast<float>(hp.norm_eps);
    // Rows whose output is needed: all n, or on the final layer the m that want logits.
    const bool compact = last && layout.m < n;
    const int64_t m = compact ? layout.m : n;
    const Tensor& positions = compact ? in.wanted_positions : in.positions;
    const Tensor& queries = compact ? in.wanted_queries : in.queries;
    const Tensor k = s.k.rows(0, n), v = s.v.rows(0, n);
    const Tensor q = s.q.rows(0, m), attn = s.attn.rows(0, m);

    // Attention block: K and V of every token into the cache.
    const Tensor h_all = s.h.rows(0, n);
    be.rms_norm(s.x.rows(0, n), w(Role::AttnNorm), eps, h_all);
    matmul(be, il, Role::AttnK, h_all, k);
    matmul(be, il, Role::AttnV, h_all, v);
    if (!w(Role::AttnKBias).empty()) be.add(k, w(Role::AttnKBias), k);
    if (!w(Role::AttnVBias).empty()) be.add(v, w(Role::AttnVBias), v);
    if (!w(Role::AttnKNorm).empty()) be.rms_norm(k.reshape(hp.head_dim), w(Role::AttnKNorm), eps, k.reshape(hp.head_dim));
    backends::RopeParams rp = rope_params(il);
    rp.n_head = hp.n_head_kv;
    be.rope(k, in.positions, rp);
    const backends::KvCacheView kv = cache_.layer(il);
    be.set_rows(k, kv.k, in.rows);
    be.set_rows(v, kv.v, in.rows);
    if (m == 0) return;

    // The m query rows: on a compacted layer, the wanted rows' normed input moves to o's first
    // rows and their residual stream to x's first rows (through h, as get_rows' source and
    // destination must not overlap).
    Tensor h_q = h_all;
    if (compact) {
        h_q = s.o.rows(0, m);
        be.get_rows(h_all, in.wanted, h_q);
        be.get_rows(s.x.rows(0, n), in.wanted, s.h.rows(0, m));
        be.copy(s.h.rows(0, m), s.x.rows(0, m));
    }
    const Tensor x = s.x.rows(0, m), h = s.h.rows(0, m), o = s.o.rows(0, m);
    matmul(be, il, Role::AttnQ, h_q, q);
    if (!w(Role::AttnQBias).empty()) be.add(q, w(Role::AttnQBias), q);
    if (!w(Role::AttnQNorm).empty()) be.rms_norm(q.reshape(hp.head_dim), w(Role::AttnQNorm), eps, q.reshape(hp.head_dim));
    rp.n_head = hp.n_head;
    be.rope(q, positions, rp);

    backends::AttentionParams ap;
    ap.n_head = hp.n_head;
    ap.n_head_kv = hp.n_head_kv;
    ap.head_dim = hp.head_dim;
    ap.head_dim_v = hp.head_dim_v;
    ap.scale = arch_.attention_scale(hp);
    ap.window = hp.layer_is_swa(il) ? hp.sliding_window : 0;
    ap.sinks = w(Role::AttnSinks);
    if (arch_.prescale_queries) {
        be.scale(q, ap.scale, q);
        ap.scale = 1.0f;
    }
    be.attention(q, kv, queries, ap, attn);
    matmul(be, il, Role::AttnOutput, attn, o);
    if (!w(Role::AttnOutputBias).empty()) be.add(o, w(Role::AttnOutputBias), o);
    if (!w(Role::PostAttnNorm).empty()) be.rms_norm(o, w(Role::PostAttnNorm), eps, o);
    be.add(x, o, x);

    // Feed-forward block (gated: SwiGLU or GeGLU; or a mixture of such experts).
    be.rms_norm(x, w(Role::FfnNorm), eps, h);
    if (arch_.moe) {
        moe_ffn(stage, il, m);
        be.add(x, o, x);
        return;
    }
    const Tensor gate = s.gate.rows(0, m), up = s.up.rows(0, m);
    matmul(be, il, Role::FfnGate, h, gate);
    matmul(be, il, Role::FfnUp, h, up);
    if (arch_.activation == FfnActivation::GeluTanh) be.gelu(gate, gate);
    else be.silu(gate, gate);
    be.mul(gate, up, gate);
    matmul(be, il, Role::FfnDown, gate, o);
    if (!w(Role::PostFfnNorm).empty()) be.rms_norm(o, w(Role::PostFfnNorm), eps, o);
    be.add(x, o, x);
}

// Router and experts on the device that holds them (the layer's, or the host with --cpu-moe): h
// crosses there and o back when that is not the layer's device. ref: llama.cpp build_moe_ffn.
void Model::moe_ffn(Stage& stage, int64_t il, int64_t m) {
    const models::Hparams& hp = info_.hparams;
    const auto w = [&](Role r) -> const Tensor& { return weights_.layer(il, r); };
    backends::Backend& be = expert_device(devices_, options_.experts, il);
    const bool away = &be != stage.backend;
    const Scratch& s = away ? *expert_scratch_ : *stage.scratch;
    const Tensor h = s.h.rows(0, m), o = s.o.rows(0, m);
    if (away) {
        const Tensor from = stage.scratch->h.rows(0, m);
        stage.backend->end_step();
        stage.backend->copy_to(*from.buffer, from.offset, be, *h.buffer, h.offset, static_cast<size_t>(m) * from.row_stride);
        be.begin_step();
    }
    const int64_t k = hp.n_expert_used;
    const Tensor logits = s.router.rows(0, m), ids = s.route_ids.rows(0, m), weights = s.route_w.rows(0, m);
    matmul(be, il, Role::FfnGateInp, h, logits);
    if (!w(Role::FfnGateInpBias).empty()) be.add(logits, w(Role::FfnGateInpBias), logits);
    backends::MoeRouteParams rp;
    rp.n_expert = hp.n_expert;
    rp.n_used = k;
    rp.gating = arch_.gating == models::ExpertGating::TopKThenSoftmax ? backends::MoeGating::TopKThenSoftmax
                                                                      : backends::MoeGating::SoftmaxThenTopK;
    rp.normalize = arch_.normalize_expert_weights;
    be.moe_route(logits, rp, ids, weights);

    const Tensor gate = s.gate_e.rows(0, k * m), up = s.up_e.rows(0, k * m), down = s.down_e.rows(0, k * m);
    matmul_id(be, il, Role::FfnGateExps, h, ids, gate);
    matmul_id(be, il, Role::FfnUpExps, h, ids, up);
    if (!w(Role::FfnGateExpsBias).empty()) be.add_id(gate, w(Role::FfnGateExpsBias), ids, gate);
    if (!w(Role::FfnUpExpsBias).empty()) be.add_id(up, w(Role::FfnUpExpsBias), ids, up);
    if (arch_.activation == FfnActivation::SwigluOai) {
        constexpr float kAlpha = 1.702f, kLimit = 7.0f;  // ref: openai/gpt-oss torch/model.py swiglu()
        be.swiglu_oai(gate, up, kAlpha, kLimit, gate);
    } else {
        be.silu(gate, gate);
        be.mul(gate, up, gate);
    }
    matmul_id(be, il, Role::FfnDownExps, gate, ids, down);
    if (!w(Role::FfnDownExpsBias).empty()) be.add_id(down, w(Role::FfnDownExpsBias), ids, down);
    be.moe_combine(down, weights, o);

    if (away) {
        const Tensor to = stage.scratch->o.rows(0, m);
        be.end_step();
        be.copy_to(*o.buffer, o.offset, *stage.backend, *to.buffer, to.offset, static_cast<size_t>(m) * o.row_stride);
        stage.backend->begin_step();
    }
}

}  // namespace deskside::engine
