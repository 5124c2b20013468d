#include "engine/step_args.h"

#include <map>

#include "engine/model.h"

namespace deskside::engine {
namespace {

constexpr int64_t kAlignWords = 64;  // 256 bytes

int64_t aligned(int64_t words) { return (words + kAlignWords - 1) / kAlignWords * kAlignWords; }

}  // namespace

void StepWords::build(std::span<const BatchToken> batch, const KvCache& cache) {
    StepLayout& l = layout;
    l.n = static_cast<int64_t>(batch.size());
    l.m = 0;
    for (const BatchToken& t : batch) l.m += t.want_logits ? 1 : 0;
    // The block tables, one per sequence, in order of first appearance.
    std::map<int32_t, int64_t> table_of;  // seq -> word offset within the tables
    std::vector<int32_t> tables;
    for (const BatchToken& t : batch) {
        if (table_of.count(t.seq)) continue;
        table_of[t.seq] = static_cast<int64_t>(tables.size());
        const std::span<const int32_t> blocks = cache.blocks(t.seq);
        tables.insert(tables.end(), blocks.begin(), blocks.end());
    }
    l.tokens = 0;
    l.positions = aligned(l.tokens + l.n);
    l.rows = aligned(l.positions + l.n);
    l.wanted = aligned(l.rows + l.n);
    l.wanted_positions = aligned(l.wanted + l.m);
    l.wanted_queries = aligned(l.wanted_positions + l.m);
    l.queries = aligned(l.wanted_queries + backends::kAttentionQueryWords * l.m);
    const int64_t tables_at = l.queries + backends::kAttentionQueryWords * l.n;
    l.total = tables_at + static_cast<int64_t>(tables.size());

    words.assign(static_cast<size_t>(l.total), 0);
    int64_t w = 0;
    for (int64_t i = 0; i < l.n; ++i) {
        const BatchToken& t = batch[i];
        const int64_t table = tables_at + table_of.at(t.seq);
        const auto n_blocks = static_cast<int32_t>(cache.blocks(t.seq).size());
        words[l.tokens + i] = t.token;
        words[l.positions + i] = t.pos;
        words[l.rows + i] = cache.row(t.seq, t.pos);
        int32_t* q = &words[l.queries + backends::kAttentionQueryWords * i];
        q[0] = t.pos;
        q[1] = static_cast<int32_t>(table - l.queries);  // counted from the tensor's first word
        q[2] = n_blocks;
        if (t.want_logits) {
            words[l.wanted + w] = static_cast<int32_t>(i);
            words[l.wanted_positions + w] = t.pos;
            int32_t* wq = &words[l.wanted_queries + backends::kAttentionQueryWords * w];
            wq[0] = t.pos;
            wq[1] = static_cast<int32_t>(table - l.wanted_queries);
            wq[2] = n_blocks;
            ++w;
        }
    }
    std::copy(tables.begin(), tables.end(), words.begin() + tables_at);
}

void StepArgs::upload(const StepWords& host) {
    const StepLayout& l = host.layout;
    const size_t bytes = static_cast<size_t>(l.total) * sizeof(int32_t);
    if (!buffer_ || buffer_->size() < bytes) {
        // Grown with room to spare, so that steps of similar shape reuse one buffer.
        buffer_.reset();
        buffer_ = backend_.alloc(std::max<size_t>(bytes + bytes / 2, 4096));
    }
    backend_.upload(*buffer_, 0, host.words.data(), bytes);
    const auto view = [&](int64_t at, int64_t n) {
        return backends::make_tensor(buffer_.get(), static_cast<size_t>(at) * sizeof(int32_t), quant::TypeId::I32, n, 1);
    };
    tokens = view(l.tokens, l.n);
    positions = view(l.positions, l.n);
    rows = view(l.rows, l.n);
    wanted = view(l.wanted, l.m);
    wanted_positions = view(l.wanted_positions, l.m);
    queries = view(l.queries, l.total - l.queries);
    wanted_queries = view(l.wanted_queries, l.total - l.wanted_queries);
}

}  // namespace deskside::engine
