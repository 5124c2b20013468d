#include "engine/scratch.h"

#include <stdexcept>
#include <vector>

namespace deskside::engine {
namespace {

constexpr size_t kAlign = 64;
constexpr uint64_t kSizeLimit = uint64_t{1} << 62;

[[noreturn]] void out_of_range(const std::string& what, const std::string& size) {
    throw std::runtime_error(what + " is out of range (" + size +
                             "): the model's hyper-parameters are not ones a real model has");
}

struct Slot {
    backends::Tensor Scratch::*tensor;
    int64_t ne0, ne1;
    quant::TypeId type = quant::TypeId::F32;
};

std::vector<Slot> slots(const models::Hparams& hp, int64_t nb, bool with_output) {
    std::vector<Slot> s = {
        {&Scratch::x, hp.n_embd, nb},
        {&Scratch::h, hp.n_embd, nb},
        {&Scratch::q, hp.n_head * hp.head_dim, nb},
        {&Scratch::k, hp.n_head_kv * hp.head_dim, nb},
        {&Scratch::v, hp.n_head_kv * hp.head_dim_v, nb},
        {&Scratch::attn, hp.n_head * hp.head_dim_v, nb},
        {&Scratch::o, hp.n_embd, nb},
        {&Scratch::gate, hp.n_ff, nb},
        {&Scratch::up, hp.n_ff, nb},
    };
    if (hp.n_expert > 0) {
        const int64_t k = hp.n_expert_used;
        s.push_back({&Scratch::router, hp.n_expert, nb});
        s.push_back({&Scratch::route_ids, k, nb, quant::TypeId::I32});
        s.push_back({&Scratch::route_w, k, nb});
        s.push_back({&Scratch::gate_e, hp.n_ff_exp, k * nb});
        s.push_back({&Scratch::up_e, hp.n_ff_exp, k * nb});
        s.push_back({&Scratch::down_e, hp.n_embd, k * nb});
    }
    if (with_output) {
        s.push_back({&Scratch::sel, hp.n_embd, kLogitRowsPerPass});
        s.push_back({&Scratch::logits, hp.n_vocab, kLogitRowsPerPass});
    }
    return s;
}

size_t slot_bytes(const Slot& s) {
    return (quant::row_bytes(s.type, s.ne0) * static_cast<size_t>(s.ne1) + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

uint64_t checked_size(std::initializer_list<int64_t> factors, const std::string& what) {
    uint64_t total = 1;
    bool ok = true;
    for (int64_t f : factors) {
        if (f < 0 || (f > 0 && total > kSizeLimit / static_cast<uint64_t>(f))) ok = false;
        if (ok) total *= static_cast<uint64_t>(f);
    }
    if (ok) return total;
    std::string product;
    for (int64_t f : factors) product += (product.empty() ? "" : " x ") + std::to_string(f);
    out_of_range(what, product);
}

uint64_t Scratch::bytes(const models::Hparams& hp, int64_t n_batch, bool with_output) {
    // The slots multiply hyper-parameters (n_head * head_dim by n_batch, k * n_batch, ...): each
    // is bounded with the widest element (4 bytes) before its size is computed, and the running
    // total kept under the limit, so no sum or product can wrap.
    const std::string what = "the activation scratch for " + std::to_string(n_batch) + " tokens";
    checked_size({hp.n_expert_used, n_batch}, what);
    uint64_t total = 0;
    for (const Slot& s : slots(hp, n_batch, with_output)) {
        checked_size({s.ne0, s.ne1, 4}, what);
        total += slot_bytes(s);
        if (total > kSizeLimit) out_of_range(what, std::to_string(total) + " bytes");
    }
    return total;
}

Scratch::Scratch(backends::Backend& backend, const models::Hparams& hp, int64_t n_batch, bool with_output) {
    const std::vector<Slot> all = slots(hp, n_batch, with_output);
    buffer = backend.alloc(bytes(hp, n_batch, with_output));
    size_t offset = 0;
    for (const Slot& s : all) {
        this->*s.tensor = backends::make_tensor(buffer.get(), offset, s.type, s.ne0, s.ne1);
        offset += slot_bytes(s);
    }
}

}  // namespace deskside::engine
