#include "engine/pooling.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace deskside::engine {

Pooling parse_pooling(std::string_view name) {
    if (name == "mean") return Pooling::Mean;
    if (name == "cls") return Pooling::Cls;
    if (name == "last") return Pooling::Last;
    throw std::invalid_argument("pooling '" + std::string(name) + "' is not one of mean, cls, last");
}

const char* pooling_name(Pooling p) {
    switch (p) {
        case Pooling::None: return "none";
        case Pooling::Mean: return "mean";
        case Pooling::Cls: return "cls";
        case Pooling::Last: return "last";
        case Pooling::Rank: return "rank";
    }
    return "unknown";
}

Pooling resolve_pooling(std::optional<Pooling> forced, const models::Hparams& hp) {
    if (forced) return *forced;
    switch (hp.pooling_type) {
        case -1:
        case static_cast<int64_t>(Pooling::None): return Pooling::Last;
        case static_cast<int64_t>(Pooling::Mean): return Pooling::Mean;
        case static_cast<int64_t>(Pooling::Cls): return Pooling::Cls;
        case static_cast<int64_t>(Pooling::Last): return Pooling::Last;
        case static_cast<int64_t>(Pooling::Rank): return Pooling::Rank;
    }
    throw std::invalid_argument(hp.architecture + ".pooling_type " + std::to_string(hp.pooling_type) +
                                " is not a pooling this server knows (0..4)");
}

bool pooling_wants(Pooling p, int64_t i, int64_t n) {
    switch (p) {
        case Pooling::Mean: return true;
        case Pooling::Cls: return i == 0;
        case Pooling::Last:
        case Pooling::Rank:
        case Pooling::None: return i == n - 1;
    }
    return false;
}

std::vector<float> pool_hidden(std::span<const float> rows, int64_t n_embd) {
    const size_t d = static_cast<size_t>(n_embd);
    const size_t n = d == 0 ? 0 : rows.size() / d;
    // Sums in double: a mean over thousands of tokens should not depend on F32 rounding order.
    std::vector<double> sum(d, 0.0);
    for (size_t r = 0; r < n; ++r)
        for (size_t j = 0; j < d; ++j) sum[j] += rows[r * d + j];
    double norm = 0;
    for (double& x : sum) {
        x /= static_cast<double>(n == 0 ? 1 : n);
        norm += x * x;
    }
    norm = std::sqrt(norm);
    std::vector<float> out(d);
    for (size_t j = 0; j < d; ++j) out[j] = static_cast<float>(norm > 0 ? sum[j] / norm : 0.0);
    return out;
}

std::vector<float> embed_sequence(Model& model, int32_t seq, std::span<const int32_t> tokens, Pooling p) {
    if (tokens.empty()) throw std::invalid_argument("an embedding needs at least one token");
    if (model.length(seq) != 0) throw std::invalid_argument("sequence " + std::to_string(seq) + " is not empty");
    const auto n = static_cast<int64_t>(tokens.size());
    std::vector<BatchToken> batch;
    batch.reserve(tokens.size());
    for (int64_t i = 0; i < n; ++i) batch.push_back({seq, tokens[i], static_cast<int32_t>(i), pooling_wants(p, i, n)});
    return pool_hidden(model.embed(batch), model.hparams().n_embd);
}

}  // namespace deskside::engine
