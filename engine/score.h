// Comparing checkpoints (`deskside score`): how far a model's next-token distributions are from a
// base model's on the same text, and multiple-choice accuracy by log-likelihood.
//
// Text: the figures llama-perplexity --kl-divergence prints (KL divergence, Δp, same top token,
// PPL ratio), with its formulas for the means, uncertainties and percentiles, but computed from
// both models' float logits over the full vocabulary: llama-perplexity stores the base's
// log-probabilities in 16 bits and drops tokens below e^-16, so its figures carry that error and
// ours do not (tests/engine/test_score.cpp bounds the difference).
//
// Multiple choice: lm-evaluation-harness's `multiple_choice` output type as its API models run it
// against a completions server (local-completions with the server's tokenizer), so that
// `score --tasks` and lm_eval against `deskside serve` agree: the same token split of context and
// choice, the same per-token log-probabilities, acc and acc_norm with its standard error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/perplexity.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::engine {

// One scored position: the base's and the model's rows of logits and the token that followed.
struct TokenComparison {
    double nll_base = 0, nll = 0;  // -log p(target)
    double kld = 0;                // KL(base ‖ model) = Σ p_base (log p_base - log p_model), nats
    double p_diff = 0;             // p_model(target) - p_base(target)
    bool same_top = false;         // both argmaxes agree (the first index wins a tie)
};
TokenComparison compare_rows(std::span<const float> base, std::span<const float> model, int32_t target);

// The value below which `fraction` of the sorted values lie, interpolated linearly between
// neighbours at fraction·(n-1) as llama-perplexity does (fraction 0.5 is the median).
double percentile(std::span<const double> sorted, double fraction);

struct Quantile {
    double fraction = 0;  // 1 = maximum, 0 = minimum
    double value = 0;
};

struct Estimate {
    double value = 0, stderr_value = 0;
};

// llama-perplexity's "Perplexity statistics", "KL divergence statistics" and "Token probability
// statistics" blocks. Probabilities are fractions (the report prints percent).
struct KldStats {
    int64_t n = 0;
    Estimate ppl, ppl_base;
    double ln_ppl_correlation = 0;  // Cor(ln PPL(Q), ln PPL(base)) over the per-token NLLs
    Estimate ln_ppl_ratio, ppl_ratio, ppl_diff;
    Estimate kld;
    std::vector<Quantile> kld_quantiles;  // kKldFractions, in that order
    Estimate p_diff;
    std::vector<Quantile> p_diff_quantiles;  // kPDiffFractions
    Estimate p_diff_rms;
    Estimate same_top;
};
// The quantiles llama-perplexity prints, from the largest down.
inline constexpr double kKldFractions[] = {1, 0.999, 0.99, 0.95, 0.90, 0.5, 0.10, 0.05, 0.01, 0.001, 0};
inline constexpr double kPDiffFractions[] = {1, 0.999, 0.99, 0.95, 0.90, 0.75, 0.5, 0.25, 0.10, 0.05, 0.01, 0.001, 0};

// Collects TokenComparisons; keeps the per-token KLD and Δp for the quantiles (16 bytes a token).
class KldAccumulator {
   public:
    void add(const TokenComparison& t);
    int64_t count() const { return nll_.n; }
    // Throws std::logic_error when nothing was added.
    KldStats stats() const;

   private:
    MeanEstimate nll_, nll_base_, kld_, p_diff_, p_diff_sq_;
    double sum_nll_nll_base_ = 0;
    int64_t n_same_top_ = 0;
    std::vector<double> klds_, p_diffs_;
};

// One multiple-choice question: the context, the choices, the index of the right one.
struct McItem {
    std::string context;
    std::vector<std::string> choices;
    int64_t gold = 0;
};

// The tokens lm-evaluation-harness sends for each choice: the context's tokens, then the tokens
// that encoding context + delimiter + choice adds past them (trailing spaces of the context move
// to the continuation). An empty context becomes the BOS token (EOS when there is none).
// Tokenized as the server's /tokenize does for it: no special tokens added, special tokens in
// the text parsed.
struct McTokens {
    std::vector<int32_t> context;
    std::vector<std::vector<int32_t>> continuations;  // one per choice (empty: log-likelihood 0, as lm-eval)
};
// Throws std::invalid_argument for a context of only whitespace (lm-eval cannot score one either)
// and for an empty context in a vocabulary without BOS and EOS.
McTokens mc_tokens(const models::Tokenizer& tokenizer, const McItem& item, const std::string& delimiter = " ");

// Σ log p(continuation token | what precedes it) for each choice, each summand rounded to float
// as the server's logprobs are. Decodes the context once on `seq` and each choice after it.
std::vector<double> mc_loglikelihoods(Model& model, const McTokens& tokens, int32_t seq = 0);

// acc and acc_norm (argmax of log-likelihood / choice length in characters) with lm-eval's
// standard error of a mean: sample standard deviation / sqrt(n).
struct McStats {
    int64_t n = 0;
    Estimate acc, acc_norm;
};
class McAccumulator {
   public:
    void add(const McItem& item, std::span<const double> loglikelihoods);
    int64_t count() const { return static_cast<int64_t>(acc_.size()); }
    McStats stats() const;

   private:
    std::vector<double> acc_, acc_norm_;
};

}  // namespace deskside::engine
