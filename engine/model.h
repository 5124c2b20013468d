// A loaded model ready to run: weights on a backend, a KV cache, scratch for one step, and the
// batch API the generation loop and the server call.
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
#include "engine/arch.h"
#include "engine/kv_cache.h"
#include "engine/weights.h"
#include "models/model.h"

namespace deskside::engine {

struct EngineOptions {
    KvCacheConfig cache;
    int64_t n_batch = 512;  // tokens computed together; longer batches are split into steps
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
    ~Model();

    const models::ModelInfo& info() const { return info_; }
    const models::Hparams& hparams() const { return info_.hparams; }
    int64_t n_vocab() const { return info_.hparams.n_vocab; }

    // Runs the batch and returns the logits of the tokens with want_logits, in batch order:
    // n_vocab floats each, valid until the next decode(). Throws std::invalid_argument for a bad
    // token id or position, std::runtime_error when the KV cache is full.
    std::span<const float> decode(std::span<const BatchToken> batch);

    // Positions of `seq` in the KV cache.
    int64_t length(int32_t seq) const { return cache_.length(seq); }
    // Forgets positions >= n_pos of `seq` (all for 0).
    void truncate(int32_t seq, int64_t n_pos) { cache_.truncate(seq, n_pos); }
    // `dst` continues from the first n_pos positions of `src` (shared prefix, no recompute).
    void fork(int32_t src, int32_t dst, int64_t n_pos) { cache_.fork(src, dst, n_pos); }

   private:
    struct Scratch;
    void validate(std::span<const BatchToken> batch) const;
    void step(std::span<const BatchToken> batch);
    void layer(int64_t il, int64_t n, std::span<const int32_t> positions,
               std::span<const backends::AttentionQuery> queries);
    backends::RopeParams rope_params(int64_t il) const;

    models::ModelInfo info_;
    backends::Backend& backend_;
    const ArchSpec& arch_;
    EngineOptions options_;
    ModelWeights weights_;
    KvCache cache_;
    std::unique_ptr<Scratch> scratch_;
    std::vector<float> logits_;  // host copy returned by decode()
};

}  // namespace deskside::engine
