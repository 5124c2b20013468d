#include "engine/score.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/output_stream.h"

namespace deskside::engine {
namespace {

int64_t argmax(std::span<const float> row) {
    int64_t best = 0;
    for (int64_t i = 1; i < static_cast<int64_t>(row.size()); ++i)
        if (row[i] > row[best]) best = i;
    return best;
}

Estimate mean_estimate(const MeanEstimate& m) { return {m.mean(), m.stderr_of_mean()}; }

std::vector<Quantile> quantiles(std::vector<double> values, std::span<const double> fractions) {
    std::sort(values.begin(), values.end());
    std::vector<Quantile> out;
    for (const double f : fractions) out.push_back({f, percentile(values, f)});
    return out;
}

// Python's str.isspace(), which str.rstrip() strips: the code points of Unicode category Zs and
// bidirectional classes WS, B, S.
bool is_python_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// Bytes of `s` that Python's rstrip() removes (s is valid UTF-8).
size_t trailing_space_bytes(const std::string& s) {
    size_t end = s.size();
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
        const auto lead = static_cast<unsigned char>(s[start]);
        const size_t len = end - start;
        char32_t c = len == 1 ? lead : lead & (0x7f >> len);
        for (size_t i = start + 1; i < end; ++i) c = (c << 6) | (static_cast<unsigned char>(s[i]) & 0x3f);
        if (!is_python_space(c)) break;
        end = start;
    }
    return s.size() - end;
}

// Python's len() of a UTF-8 string: its code points.
double code_points(const std::string& s) {
    return static_cast<double>(
        std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xc0) != 0x80; }));
}

// numpy.argmax: the first maximum.
size_t first_max(std::span<const double> v) { return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

// lm-eval's mean with its stderr: sample standard deviation (n - 1) / sqrt(n).
Estimate sample_mean(const std::vector<double>& v) {
    const auto n = static_cast<double>(v.size());
    double sum = 0;
    for (const double x : v) sum += x;
    const double mean = sum / n;
    if (v.size() < 2) return {mean, 0};
    double sq = 0;
    for (const double x : v) sq += (x - mean) * (x - mean);
    return {mean, std::sqrt(sq / (n - 1)) / std::sqrt(n)};
}

}  // namespace

TokenComparison compare_rows(std::span<const float> base, std::span<const float> model, int32_t target) {
    const double lse_base = log_sum_exp(base);
    const double lse = log_sum_exp(model);
    TokenComparison t;
    t.nll_base = lse_base - base[target];
    t.nll = lse - model[target];
    for (size_t i = 0; i < base.size(); ++i) {
        const double lp_base = base[i] - lse_base;
        t.kld += std::exp(lp_base) * (lp_base - (model[i] - lse));
    }
    t.p_diff = std::exp(-t.nll) - std::exp(-t.nll_base);
    t.same_top = argmax(base) == argmax(model);
    return t;
}

double percentile(std::span<const double> sorted, double fraction) {
    if (fraction <= 0) return sorted.front();
    if (fraction >= 1) return sorted.back();
    const double p = fraction * static_cast<double>(sorted.size() - 1);
    const auto i = static_cast<size_t>(p);
    const double w = p - static_cast<double>(i);
    return (1 - w) * sorted[i] + w * sorted[std::min(i + 1, sorted.size() - 1)];
}

void KldAccumulator::add(const TokenComparison& t) {
    nll_.add(t.nll);
    nll_base_.add(t.nll_base);
    sum_nll_nll_base_ += t.nll * t.nll_base;
    kld_.add(t.kld);
    p_diff_.add(t.p_diff);
    p_diff_sq_.add(t.p_diff * t.p_diff);
    n_same_top_ += t.same_top;
    klds_.push_back(t.kld);
    p_diffs_.push_back(t.p_diff);
}

KldStats KldAccumulator::stats() const {
    if (nll_.n == 0) throw std::logic_error("KldAccumulator::stats: no tokens were compared");
    KldStats s;
    const int64_t n = nll_.n;
    const auto nd = static_cast<double>(n);
    s.n = n;
    const Estimate ln_ppl = mean_estimate(nll_), ln_ppl_base = mean_estimate(nll_base_);
    s.ppl = {std::exp(ln_ppl.value), std::exp(ln_ppl.value) * ln_ppl.stderr_value};
    s.ppl_base = {std::exp(ln_ppl_base.value), std::exp(ln_ppl_base.value) * ln_ppl_base.stderr_value};
    // Covariance of the two mean NLLs (per-token covariance / (n - 1)), as llama-perplexity takes it.
    const double cov = n > 1 ? (sum_nll_nll_base_ / nd - ln_ppl.value * ln_ppl_base.value) / (nd - 1) : 0;
    const double se_product = ln_ppl.stderr_value * ln_ppl_base.stderr_value;
    s.ln_ppl_correlation = se_product > 0 ? cov / se_product : 0;
    const double ln_ratio_var = ln_ppl.stderr_value * ln_ppl.stderr_value +
                                ln_ppl_base.stderr_value * ln_ppl_base.stderr_value - 2 * cov;
    s.ln_ppl_ratio = {ln_ppl.value - ln_ppl_base.value, std::sqrt(std::max(0.0, ln_ratio_var))};
    const double ratio = std::exp(s.ln_ppl_ratio.value);
    s.ppl_ratio = {ratio, ratio * s.ln_ppl_ratio.stderr_value};
    const double diff_var = s.ppl.stderr_value * s.ppl.stderr_value +
                            s.ppl_base.stderr_value * s.ppl_base.stderr_value - 2 * s.ppl.value * s.ppl_base.value * cov;
    s.ppl_diff = {s.ppl.value - s.ppl_base.value, std::sqrt(std::max(0.0, diff_var))};
    s.kld = mean_estimate(kld_);
    s.kld_quantiles = quantiles(klds_, kKldFractions);
    s.p_diff = mean_estimate(p_diff_);
    s.p_diff_quantiles = quantiles(p_diffs_, kPDiffFractions);
    // RMS and its uncertainty by the delta method on the mean of Δp².
    const Estimate msd = mean_estimate(p_diff_sq_);
    const double rms = std::sqrt(msd.value);
    s.p_diff_rms = {rms, rms > 0 ? 0.5 / rms * msd.stderr_value : 0};
    const double top = static_cast<double>(n_same_top_) / nd;
    s.same_top = {top, n > 1 ? std::sqrt(top * (1 - top) / (nd - 1)) : 0};
    return s;
}

McTokens mc_tokens(const models::Tokenizer& tokenizer, const McItem& item, const std::string& delimiter) {
    const auto encode = [&](const std::string& text) { return tokenizer.encode(text, false, true); };
    McTokens out;
    if (item.context.empty()) {
        // lm-eval's prefix token is `bos_token_id or eos_token_id`: Python's `or` also passes over id 0.
        const std::optional<int32_t> bos = tokenizer.bos(), eos = tokenizer.eos();
        const std::optional<int32_t> prefix = bos && *bos != 0 ? bos : eos;
        if (!prefix) throw std::invalid_argument("an empty context needs a BOS or EOS token, and the model has neither");
        for (const std::string& choice : item.choices) {
            std::vector<int32_t> cont = encode(delimiter + choice);
            // A continuation that starts with the prefix token scores from its own first token.
            if (!cont.empty() && cont[0] == *prefix) cont.erase(cont.begin());
            out.continuations.push_back(std::move(cont));
        }
        out.context = {*prefix};
        return out;
    }
    const size_t n_space = trailing_space_bytes(item.context);
    const std::string context = item.context.substr(0, item.context.size() - n_space);
    const std::string moved = item.context.substr(context.size());
    if (context.empty()) throw std::invalid_argument("the context is only whitespace");
    out.context = encode(context);
    for (const std::string& choice : item.choices) {
        const std::vector<int32_t> whole = encode(context + moved + delimiter + choice);
        const size_t skip = std::min(out.context.size(), whole.size());
        out.continuations.emplace_back(whole.begin() + static_cast<std::ptrdiff_t>(skip), whole.end());
    }
    return out;
}

std::vector<double> mc_loglikelihoods(Model& model, const McTokens& tokens, int32_t seq) {
    const std::vector<int32_t>& ctx = tokens.context;
    const auto n_ctx = static_cast<int32_t>(ctx.size());
    std::vector<BatchToken> batch;
    model.truncate(seq, 0);
    for (int32_t i = 0; i + 1 < n_ctx; ++i) batch.push_back({seq, ctx[i], i, false});
    if (!batch.empty()) model.decode(batch);
    std::vector<double> out;
    for (const std::vector<int32_t>& cont : tokens.continuations) {
        // The last context token and every continuation token but the last: row k predicts cont[k].
        model.truncate(seq, n_ctx - 1);
        batch = {{seq, ctx.back(), n_ctx - 1, true}};
        for (size_t k = 0; k + 1 < cont.size(); ++k)
            batch.push_back({seq, cont[k], n_ctx + static_cast<int32_t>(k), true});
        double ll = 0;
        if (!cont.empty()) {
            const std::span<const float> logits = model.decode(batch);
            const int64_t n_vocab = model.n_vocab();
            for (size_t k = 0; k < cont.size(); ++k)
                ll += token_logprob(logits.subspan(k * n_vocab, n_vocab), cont[k], 0).logprob;
        }
        out.push_back(ll);
    }
    model.truncate(seq, 0);
    return out;
}

void McAccumulator::add(const McItem& item, std::span<const double> loglikelihoods) {
    std::vector<double> normed;
    for (size_t i = 0; i < item.choices.size(); ++i) normed.push_back(loglikelihoods[i] / code_points(item.choices[i]));
    const auto gold = static_cast<size_t>(item.gold);
    acc_.push_back(first_max(loglikelihoods) == gold ? 1 : 0);
    acc_norm_.push_back(first_max(normed) == gold ? 1 : 0);
}

McStats McAccumulator::stats() const { return {count(), sample_mean(acc_), sample_mean(acc_norm_)}; }

}  // namespace deskside::engine
