// Pooling a sequence's final hidden states (Model::embed) into one embedding vector.
//
// The kinds are llama.cpp's (GGUF `{arch}.pooling_type`, same numbering): mean over every token,
// the first token's state (CLS, what BERT-style encoders are trained for), or the last token's
// (what decoder-only embedding models such as e5-mistral or Qwen3-Embedding are trained for).
// Vectors come out L2-normalised, as OpenAI's embeddings are, so a dot product is the cosine.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/model.h"
#include "models/model.h"

namespace deskside::engine {

// Numbered as llama.cpp's enum llama_pooling_type (the values GGUF files store).
enum class Pooling { None = 0, Mean = 1, Cls = 2, Last = 3, Rank = 4 };

// "mean", "cls", "last" (the --pooling values; "none" and "rank" are not poolings one can ask
// for). Throws std::invalid_argument naming the accepted values.
Pooling parse_pooling(std::string_view name);
const char* pooling_name(Pooling p);

// The pooling a model is served with: `forced` (--pooling) when given, else the file's
// pooling_type, else last-token. Last is the default for a causal LM, as in llama.cpp and vLLM:
// only the last token has attended to the whole input. A file declaring "none" (per-token
// output, which OpenAI's API cannot return) gets that default too. Rank stays Rank: a reranker
// has no embedding, and the server refuses it. Throws std::invalid_argument for an unknown value.
Pooling resolve_pooling(std::optional<Pooling> forced, const models::Hparams& hp);

// Whether token `i` of an `n`-token sequence contributes to pooling `p` (its hidden state is
// asked for with BatchToken::want_logits).
bool pooling_wants(Pooling p, int64_t i, int64_t n);

// The embedding from the hidden states of the tokens pooling_wants() chose, in order (n_embd
// floats each): their mean, L2-normalised. A zero vector stays zero.
std::vector<float> pool_hidden(std::span<const float> rows, int64_t n_embd);

// The embedding of `tokens` (non-empty) as sequence `seq`, which must be empty: one
// Model::embed over the tokens, asking for the hidden states pooling `p` uses, then pool_hidden.
// The sequence keeps the tokens' KV positions (the same a decode would leave), for the caller to
// reuse as a prefix or truncate. Throws what Model::embed throws.
std::vector<float> embed_sequence(Model& model, int32_t seq, std::span<const int32_t> tokens, Pooling p);

}  // namespace deskside::engine
