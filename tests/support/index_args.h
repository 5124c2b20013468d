// Per-call index arguments for op tests: the I32 tensors (backends/backend.h) that the engine
// builds once per step (engine/step_args.h), made here from host vectors on any backend.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backends/backend.h"

namespace deskside::test {

// An I32 tensor [n, 1] on a backend; converts to the Tensor an op takes. The buffer lives as long
// as the object (a temporary in a call's argument list lives until the call has returned).
struct IndexTensor {
    std::unique_ptr<backends::Buffer> buffer;
    backends::Tensor tensor;
    operator const backends::Tensor&() const { return tensor; }
};

inline IndexTensor index_tensor(backends::Backend& be, std::span<const int32_t> values) {
    IndexTensor out;
    const size_t n = std::max<size_t>(values.size(), 1);
    out.buffer = be.alloc(n * sizeof(int32_t));
    if (!values.empty()) be.upload(*out.buffer, 0, values.data(), values.size_bytes());
    out.tensor = backends::make_tensor(out.buffer.get(), 0, quant::TypeId::I32, static_cast<int64_t>(values.size()), 1);
    return out;
}
inline IndexTensor index_tensor(backends::Backend& be, std::initializer_list<int32_t> values) {
    return index_tensor(be, std::span<const int32_t>(values.begin(), values.size()));
}

// One attention query as a test states it: its position and its sequence's block table.
struct TestQuery {
    int32_t pos = 0;
    std::vector<int32_t> blocks;
};

// The attention argument words for `queries` (kAttentionQueryWords): headers, then one table per
// query (tests do not share tables; the engine does).
inline std::vector<int32_t> attention_words(std::span<const TestQuery> queries) {
    const int64_t k = backends::kAttentionQueryWords;
    std::vector<int32_t> words(static_cast<size_t>(k) * queries.size());
    for (size_t i = 0; i < queries.size(); ++i) {
        words[k * i] = queries[i].pos;
        words[k * i + 1] = static_cast<int32_t>(words.size());
        words[k * i + 2] = static_cast<int32_t>(queries[i].blocks.size());
        words.insert(words.end(), queries[i].blocks.begin(), queries[i].blocks.end());
    }
    return words;
}

inline IndexTensor attention_args(backends::Backend& be, std::span<const TestQuery> queries) {
    const std::vector<int32_t> words = attention_words(queries);
    return index_tensor(be, words);
}

}  // namespace deskside::test
