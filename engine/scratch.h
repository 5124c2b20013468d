// Activation buffers of one device for up to n_batch tokens, allocated once per model.
//
// Every device of a split model holds the per-layer activations; only the device that computes
// the logits (the last) also holds the output rows. The same slot list gives the byte count the
// placement plan reserves (engine/placement.h), so the plan and the allocation cannot drift.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "models/model.h"

namespace deskside::engine {

// Rows of logits computed per output matmul: bounds the scratch for large vocabularies.
constexpr int64_t kLogitRowsPerPass = 32;

// The product of sizes taken from a model's hyper-parameters (elements, bytes), checked: throws
// std::runtime_error naming `what` and the factors when one is negative or the product passes
// 2^62 bytes, so a hostile file gets an error instead of a wrapped size that seems to fit.
uint64_t checked_size(std::initializer_list<int64_t> factors, const std::string& what);

struct Scratch {
    // Allocates every slot on `backend`; the output slots only when `with_output`.
    Scratch(backends::Backend& backend, const models::Hparams& hp, int64_t n_batch, bool with_output);
    // Bytes that allocation takes; throws (checked_size) when the hyper-parameters make it absurd.
    static uint64_t bytes(const models::Hparams& hp, int64_t n_batch, bool with_output);

    std::unique_ptr<backends::Buffer> buffer;
    backends::Tensor x;       // [n_embd, n_batch] residual stream
    backends::Tensor h;       // [n_embd, n_batch] normed input of a sub-block
    backends::Tensor q;       // [n_head * head_dim, n_batch]
    backends::Tensor k;       // [n_head_kv * head_dim, n_batch]
    backends::Tensor v;       // [n_head_kv * head_dim_v, n_batch]
    backends::Tensor attn;    // [n_head * head_dim_v, n_batch]
    backends::Tensor o;       // [n_embd, n_batch] sub-block output
    backends::Tensor gate;    // [n_ff, n_batch]
    backends::Tensor up;      // [n_ff, n_batch]
    // Mixture of experts (models with n_expert > 0), k = n_expert_used:
    backends::Tensor router;     // [n_expert, n_batch] router logits
    backends::Tensor route_ids;  // I32 [k, n_batch] chosen experts
    backends::Tensor route_w;    // [k, n_batch] their weights
    backends::Tensor gate_e;     // [n_ff_exp, k * n_batch]
    backends::Tensor up_e;       // [n_ff_exp, k * n_batch]
    backends::Tensor down_e;     // [n_embd, k * n_batch]
    backends::Tensor sel;     // [n_embd, kLogitRowsPerPass] rows that want logits (with_output)
    backends::Tensor logits;  // [n_vocab, kLogitRowsPerPass] (with_output)
};

}  // namespace deskside::engine
