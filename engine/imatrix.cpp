#include "engine/imatrix.h"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/activation_observer.h"

namespace deskside::engine {
namespace {

// llama-imatrix asks only for matmuls over at least this many rows (its `ask` callback).
constexpr int64_t kMinDenseRows = 16;

class Collector : public ActivationObserver {
   public:
    void matmul(std::string_view weight, std::span<const float> x, int64_t n_cols) override {
        const int64_t n_rows = static_cast<int64_t>(x.size()) / n_cols;
        if (n_rows < kMinDenseRows) return;
        Sums& s = sums_for(weight, n_cols, 1);
        for (int64_t r = 0; r < n_rows; ++r) add_row(s, 0, x.data() + r * n_cols);
        s.counts[0] += n_rows;
    }

    void matmul_id(std::string_view weight, int64_t n_expert, std::span<const float> x, int64_t n_cols,
                   std::span<const int32_t> ids, int64_t n_used) override {
        const int64_t n_tokens = static_cast<int64_t>(ids.size()) / n_used;
        const bool row_per_slot = static_cast<int64_t>(x.size()) / n_cols == n_tokens * n_used;
        Sums& s = sums_for(weight, n_cols, n_expert);
        // llama-imatrix's order: expert, then slot, then token.
        for (int64_t ex = 0; ex < n_expert; ++ex) {
            for (int64_t slot = 0; slot < n_used; ++slot) {
                for (int64_t t = 0; t < n_tokens; ++t) {
                    if (ids[static_cast<size_t>(t * n_used + slot)] != ex) continue;
                    const int64_t row = row_per_slot ? t * n_used + slot : t;
                    add_row(s, ex, x.data() + row * n_cols);
                    ++s.counts[static_cast<size_t>(ex)];
                }
            }
        }
    }

    models::Imatrix result(int64_t n_chunks, int64_t n_ctx) const {
        models::Imatrix im;
        im.chunk_count = n_chunks;
        im.chunk_size = n_ctx;
        for (const auto& [name, s] : sums_) {  // std::map: sorted by name, as llama-imatrix writes them
            models::ImatrixEntry e;
            e.name = name;
            e.n_per_row = s.n_cols;
            e.n_mat = s.n_mat;
            e.in_sum2 = s.in_sum2;
            for (const int64_t c : s.counts) e.counts.push_back(static_cast<float>(c));
            im.entries.push_back(std::move(e));
        }
        return im;
    }

   private:
    struct Sums {
        int64_t n_cols = 0, n_mat = 0;
        std::vector<float> in_sum2;   // n_mat * n_cols
        std::vector<int64_t> counts;  // n_mat
    };

    Sums& sums_for(std::string_view weight, int64_t n_cols, int64_t n_mat) {
        auto [it, fresh] = sums_.try_emplace(std::string(weight));
        Sums& s = it->second;
        if (fresh) {
            s.n_cols = n_cols;
            s.n_mat = n_mat;
            s.in_sum2.assign(static_cast<size_t>(n_cols * n_mat), 0.0f);
            s.counts.assign(static_cast<size_t>(n_mat), 0);
        } else if (s.n_cols != n_cols || s.n_mat != n_mat) {
            throw std::logic_error("imatrix: " + it->first + " seen as " + std::to_string(n_mat) + " x " +
                                   std::to_string(n_cols) + " after " + std::to_string(s.n_mat) + " x " +
                                   std::to_string(s.n_cols));
        }
        return s;
    }

    static void add_row(Sums& s, int64_t mat, const float* x) {
        float* sums = s.in_sum2.data() + mat * s.n_cols;
        for (int64_t j = 0; j < s.n_cols; ++j) sums[j] += x[j] * x[j];
    }

    std::map<std::string, Sums> sums_;
};

// Detaches the observer however the run ends.
class Observing {
   public:
    Observing(Model& model, ActivationObserver& observer) : model_(model) { model_.set_observer(&observer); }
    ~Observing() { model_.set_observer(nullptr); }
    Observing(const Observing&) = delete;
    Observing& operator=(const Observing&) = delete;

   private:
    Model& model_;
};

}  // namespace

models::Imatrix collect_imatrix(Model& model, std::span<const int32_t> tokens, const ImatrixRun& run) {
    const int64_t n_ctx = run.n_ctx;
    if (n_ctx < 1) throw std::invalid_argument("imatrix: the chunk size must be positive");
    if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx)
        throw std::invalid_argument("imatrix: the text has " + std::to_string(tokens.size()) + " tokens; chunks of " +
                                    std::to_string(n_ctx) + " need at least " + std::to_string(2 * n_ctx));
    int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
    if (run.max_chunks > 0 && run.max_chunks < n_chunks) n_chunks = run.max_chunks;

    Collector collector;
    const Observing observing(model, collector);
    std::vector<BatchToken> batch(static_cast<size_t>(n_ctx));
    for (int64_t c = 0; c < n_chunks; ++c) {
        const auto chunk = tokens.subspan(static_cast<size_t>(c * n_ctx), static_cast<size_t>(n_ctx));
        for (int64_t i = 0; i < n_ctx; ++i)
            batch[static_cast<size_t>(i)] = {0, chunk[static_cast<size_t>(i)], static_cast<int32_t>(i), true};
        if (run.bos) batch[0].token = *run.bos;
        model.truncate(0, 0);
        model.decode(batch);
        if (run.progress) run.progress(c + 1, n_chunks);
    }
    model.truncate(0, 0);
    return collector.result(n_chunks, n_ctx);
}

}  // namespace deskside::engine
