// A model's hyper-parameters checked at load, before anything is sized from
// them: each within a range no real model leaves, consistent with each other
// (head_count_kv divides head_count, ...) and with the tensor table
// (block_count layers of tensors, every tensor of the family the shape the
// hyper-parameters give, a vocabulary no larger than the embedding table). The
// KV cache, the scratch buffers and the placement plan multiply these values,
// so a hostile file must fail here, naming the field as the file spells it
// ("llama.block_count", or config.json's "num_hidden_layers") and the file,
// never later as an allocation failure or an overflow.
#pragma once

#include <cstdint>

#include "models/model.h"

namespace deskside::models {

// Bounds far above any released model and far below where a product of two
// overflows int64.
constexpr int64_t kMaxModelDim =
    int64_t{1} << 24; // embedding, heads, head size, FFN, vocabulary rows
constexpr int64_t kMaxLayers = int64_t{1} << 16;
constexpr int64_t kMaxExperts = int64_t{1} << 16;
constexpr int64_t kMaxContext = int64_t{1} << 32;

// Throws std::runtime_error naming `info.path` and the field. `tokenizer_vocab`
// is the number of tokens the tokenizer can produce (0: none known); ids beyond
// the embedding table's rows could never be embedded, so such a file is refused
// (llama.cpp refuses any difference for GGUF files). Files without an
// architecture or without tensors (vocabulary-only) get the range checks only.
void check_hparams(const ModelInfo &info, int64_t tokenizer_vocab);

} // namespace deskside::models
