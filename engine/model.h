// A loaded model ready to run: weights on one backend or split by layers across several, a KV
// cache, scratch for one step, and the batch API the generation loop and the server call.
//
// decode() runs one step over a batch of tokens that may belong to different sequences (the
// continuous-batching server packs decode tokens of running requests and prompt chunks into one
// batch); prompts and single-sequence generation use it too. A token's logits never depend on
// which other tokens share its batch (DESIGN.md key decision 5).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "engine/activation_observer.h"
#include "engine/arch.h"
#include "engine/device_layers.h"
#include "engine/kv_cache.h"
#include "engine/load_progress.h"
#include "engine/scratch.h"
#include "engine/stage_link.h"
#include "engine/weights.h"
#include "models/model.h"

namespace deskside::engine {

struct EngineOptions {
    KvCacheConfig cache;
    int64_t n_batch = 512;  // tokens computed together; longer batches are split into steps
    // Mixture-of-experts models: expert blocks kept in host memory and run there (--cpu-moe,
    // --n-cpu-moe); the host backend must outlive the Model.
    ExpertPlacement experts;
    // A model split across processes (--split-hosts): the link to the ranks that run the devices
    // entries with a host (engine/stage_link.h); must outlive the Model. nullptr: one process.
    StageLink* hosts = nullptr;
    // Told of each tensor placed while the Model is constructed (engine/load_progress.h); the
    // Model does not keep it.
    LoadProgress progress;
};

// One token of a batch: token `token` of sequence `seq` at position `pos`. A sequence's tokens
// must extend it in order: pos equals the sequence's current length (see Model::length).
struct BatchToken {
    int32_t seq = 0;
    int32_t token = 0;
    int32_t pos = 0;
    bool want_logits = false;
};

class Model {
   public:
    // Places `info`'s weights on `backend` (which must outlive the Model). Throws
    // std::runtime_error for unsupported architectures, missing or misshapen tensors.
    Model(models::ModelInfo info, backends::Backend& backend, const EngineOptions& options = {});
    // Split by layers: each entry runs its layer range with its weights, KV cache and scratch;
    // the residual stream crosses to the next device between ranges. One entry covering every
    // layer is exactly the single-backend model. Throws std::invalid_argument when the ranges
    // do not cover the layers in order (check_device_layers).
    Model(models::ModelInfo info, std::vector<DeviceLayers> devices, const EngineOptions& options = {});
    ~Model();

    const models::ModelInfo& info() const { return info_; }
    const models::Hparams& hparams() const { return info_.hparams; }
    int64_t n_vocab() const { return info_.hparams.n_vocab; }

    // Runs the batch and returns the logits of the tokens with want_logits, in batch order:
    // n_vocab floats each, valid until the next decode(). Throws std::invalid_argument for a bad
    // token id or position, std::runtime_error when the KV cache is full.
    std::span<const float> decode(std::span<const BatchToken> batch);
    // Runs the batch like decode() but returns, for the tokens with want_logits, the final hidden
    // states instead of logits: after output_norm, before the output head, n_embd floats each,
    // valid until the next call. Embeddings are pooled from these (engine/pooling.h).
    std::span<const float> embed(std::span<const BatchToken> batch);

    // Positions of `seq` in the KV cache.
    int64_t length(int32_t seq) const { return cache_.length(seq); }
    // Forgets positions >= n_pos of `seq` (all for 0).
    void truncate(int32_t seq, int64_t n_pos);
    // `dst` continues from the first n_pos positions of `src` (shared prefix, no recompute).
    void fork(int32_t src, int32_t dst, int64_t n_pos);
    // KV cache blocks not held by any sequence (a block shared by several counts once).
    int64_t n_free_blocks() const { return cache_.n_free_blocks(); }
    int64_t kv_block_size() const { return cache_.block_size(); }
    // Free blocks `seq` would take to hold n_pos positions (see KvCache::blocks_needed).
    int64_t kv_blocks_needed(int32_t seq, int64_t n_pos) const { return cache_.blocks_needed(seq, n_pos); }
    // Positions the KV cache holds over all sequences.
    int64_t kv_positions() const { return cache_.n_positions(); }

    // The devices and their layer ranges, in order (with the other hosts' ranges, --split-hosts).
    const std::vector<DeviceLayers>& devices() const { return devices_; }

    // Hands every layer matmul's input to `observer` from the next step on (nullptr: none). The
    // observer must outlive its use; observing copies activations to the host at each matmul.
    void set_observer(ActivationObserver* observer) { observer_ = observer; }

   private:
    struct Stage;
    struct StepInputs;
    // What a step returns for the tokens that want output: logits or normed hidden states.
    enum class Output { Logits, Hidden };
    void validate(std::span<const BatchToken> batch) const;
    std::span<const float> run(std::span<const BatchToken> batch, Output output);
    void step(std::span<const BatchToken> batch, Output output);
    // One layer over the step's n tokens. On the step's final layer (`last`) the output is
    // computed only for the tokens that want logits, in x's first rows (see forward.cpp).
    void layer(Stage& stage, int64_t il, int64_t n, bool last);
    void cross(const Stage& from, Stage& to, int64_t n);
    // --split-hosts: rank 0 sends `c` to the other ranks (engine/stage_link.h); a no-op elsewhere.
    bool announcing() const;
    void announce(const StageCommand& c);
    // The step's residual stream to or from another host, through host memory.
    void send_x(const Stage& from, int host, int64_t n);
    void receive_x(int host, Stage& to, int64_t n);
    // The FFN of a mixture-of-experts layer: o = sum of the chosen experts of h, weighted.
    void moe_ffn(Stage& stage, int64_t il, int64_t m);
    backends::RopeParams rope_params(int64_t il) const;
    // be.matmul / be.matmul_id with layer il's weight of `role`, shown to the observer first.
    void matmul(backends::Backend& be, int64_t il, Role role, const backends::Tensor& x, const backends::Tensor& y);
    void matmul_id(backends::Backend& be, int64_t il, Role role, const backends::Tensor& x, const backends::Tensor& ids,
                   const backends::Tensor& y);
    void observe(backends::Backend& be, int64_t il, Role role, const backends::Tensor& x, const backends::Tensor* ids);

    models::ModelInfo info_;
    const ArchSpec& arch_;  // before devices_: an unsupported architecture is the first error
    std::vector<DeviceLayers> devices_;
    EngineOptions options_;
    ModelWeights weights_;
    KvCache cache_;
    std::vector<Stage> stages_;          // one per local device, in layer order
    std::unique_ptr<Scratch> expert_scratch_;  // on options_.experts.host, when it runs expert blocks
    std::vector<float> rope_factors_;  // the frequency divisors RoPE uses (rope_freqs or LongRoPE's)
    std::unique_ptr<StepInputs> inputs_;
    std::vector<float> logits_;  // host copy returned by decode() or embed()
    std::vector<float> hop_;     // --split-hosts: the residual stream crossing to or from a host
    ActivationObserver* observer_ = nullptr;
};

}  // namespace deskside::engine
