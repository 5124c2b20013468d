// `deskside score --text` against llama-perplexity on the same files and text
// (../shared/reference/README.md: -c 128 on ppl-text-gpl3.txt, 173 chunks, 63 scored tokens each):
// perplexity against its published values, and the --kl-divergence statistics of Q8_0 and Q4_0
// against F32 against kld/stories260K-{q8_0,q4_0}.txt, within a tolerance built from two measured
// parts, each stated where it is computed:
//   1. llama-perplexity's 16-bit storage of the base's log-probabilities (storage_bound), bounded
//      analytically position by position from our own logits;
//   2. the difference between our engine's logits and llama.cpp's (engine_spread), measured on
//      llama.cpp's reference rows (../shared/reference/stories260K*.logits.f32) where the F32 and
//      the quantized runs saw the same tokens.
// Plus half a unit of the last digit llama-perplexity printed. Then the statistics and the
// multiple-choice scoring rules on small inputs whose answers follow from the definitions.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "backends/cpu/cpu_backend.h"
#include "engine/score.h"
#include "models/model.h"
#include "models/tokenizer/tokenizer.h"
#include "reference_cases.h"
#include "support/paths.h"
#include "support/process.h"

namespace deskside::engine {
namespace {

using test::shared_path;

std::string model_path(const std::string& stem) { return shared_path("models/" + stem + ".gguf"); }

// The "Label: value" lines of a llama-perplexity --kl-divergence report, by label ("Mean    KLD",
// "99.9%   KLD", "Same top p"); the value is the first number after the colon, so "± err" is dropped.
std::map<std::string, double> read_llama_report(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::map<std::string, double> out;
    std::string line;
    while (std::getline(in, line)) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos || line.starts_with("=")) continue;
        std::string label = line.substr(0, colon);
        while (!label.empty() && label.back() == ' ') label.pop_back();
        out[label] = std::stod(line.substr(colon + 1));
    }
    return out;
}

// llama-perplexity's label of a quantile ("Maximum", "99.9%  ", "Median ", " 5.0%  ").
std::string llama_label(double fraction, const std::string& what) {
    if (fraction >= 1) return "Maximum " + what;
    if (fraction <= 0) return "Minimum " + what;
    if (fraction == 0.5) return "Median  " + what;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%4.1f%%   ", 100 * fraction);
    return buf + what;
}

// 1. What llama-perplexity's storage of the base can change, from our logits. For each position it
// keeps, per base row with largest logit M and smallest m, m' = max(m, M - 16), scale s = (M - m') / 65535,
// each log-probability as round((x - m') / s) on 16 bits. Read back, every log-probability lp is off by
// e with |e| <= s/2 (plus float rounding, well under 1e-5); logits below m' become m' and, like every
// log-probability at or below -16, are left out of its KLD sum. With ε = s/2 + 1e-5 and q the model's
// distribution, its per-position KLD, Σ_kept p e^e (lp + e - lq), differs from the exact Σ p (lp - lq) by at
// most
//     Σ_i p_i (|lp_i - lq_i| (e^ε - 1) + e^ε ε)  +  Σ_{lp_i <= -16 + ε} p_i |lp_i - lq_i|,
// so the mean moves by at most the mean of that and every quantile by at most its maximum (an order
// statistic moves no more than the largest change of any element). The base's argmax can change only
// where its top-2 gap is below 2ε (two logits closer than s can round to one value; the first index
// wins). Its p(target) is off by at most p (e^ε - 1), or e^-16 below the floor. The same floor gives
// llama-perplexity's "Mean PPL(base)" of 104.78 instead of 105.32: a target below M - 16 scores
// -log p = 16 + log Σ exp(x - M); `ppl_base_floored` redoes that on our logits.
struct StorageBound {
    double kld_mean = 0;         // bound on the change of the mean KLD
    double kld_max = 0;          // bound on the change of any KLD quantile
    int64_t top_ties = 0;        // positions whose base argmax the storage may change
    double p_diff_max = 0;       // bound on the change of any position's Δp
    double ppl_base_floored = 0;  // PPL(base) with llama-perplexity's floor
};

StorageBound storage_bound(Model& base, Model& model, const TextChunks& chunks) {
    StorageBound b;
    MeanEstimate floored;
    double sum = 0;
    const int64_t n_vocab = base.n_vocab();
    for (int64_t c = 0; c < chunks.n_chunks(); ++c) {
        const std::span<const float> base_rows = decode_chunk(base, chunks, c);
        const std::span<const float> rows = decode_chunk(model, chunks, c);
        for (int64_t i = 0; i < chunks.n_scored(); ++i) {
            const std::span<const float> x = base_rows.subspan(i * n_vocab, n_vocab), y = rows.subspan(i * n_vocab, n_vocab);
            const int32_t target = chunks.targets(c)[i];
            const float hi = *std::max_element(x.begin(), x.end()), lo = std::max(*std::min_element(x.begin(), x.end()), hi - 16);
            const double eps = (hi - lo) / 65535.0 / 2 + 1e-5;
            const double lse_x = log_sum_exp(x), lse_y = log_sum_exp(y);
            double bound = 0;
            for (int64_t v = 0; v < n_vocab; ++v) {
                const double lp = x[v] - lse_x, d = std::fabs(lp - (y[v] - lse_y)), p = std::exp(lp);
                bound += p * (d * std::expm1(eps) + std::exp(eps) * eps);
                if (lp <= -16 + eps) bound += p * d;
            }
            sum += bound;
            b.kld_max = std::max(b.kld_max, bound);
            std::vector<float> sorted(x.begin(), x.end());
            std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
            b.top_ties += sorted[0] - sorted[1] <= 2 * eps;
            const double p_target = std::exp(x[target] - lse_x);
            b.p_diff_max = std::max(b.p_diff_max, p_target * std::expm1(eps) + (x[target] < lo ? std::exp(-16.0) : 0));
            floored.add(std::min(lse_x - x[target], 16 + (lse_x - hi)));
        }
    }
    b.kld_mean = sum / static_cast<double>(chunks.n_chunks() * chunks.n_scored());
    b.ppl_base_floored = std::exp(floored.mean());
    return b;
}

// 2. How far our engine's statistics land from llama.cpp's on logits of the same inputs: llama.cpp's
// reference rows of the F32 and the quantized model, on the positions of each reference case before
// their greedy continuations part (the same tokens in), against ours on the same tokens. Measured per
// position: the KLD difference relative to the mean KLD (the mean's tolerance: |mean a - mean b| <=
// mean |a - b|), its largest relative difference (every quantile's: if each element moves by at most ρ
// of itself, so does every order statistic), the RMS of the Δp differences (RMS Δp's: by Minkowski,
// |rms a - rms b| <= rms (a - b)), and the positions whose "same top token" verdict differs.
struct EngineSpread {
    int64_t rows = 0;
    double kld_mean_rel = 0, kld_max_rel = 0, p_diff_rms = 0;
    int64_t top_flips = 0;
};

EngineSpread engine_spread(Model& base, Model& model, const std::string& model_stem) {
    const test::ReferenceRun ref_base = test::load_reference("stories260K"), ref = test::load_reference(model_stem);
    const int64_t n_vocab = ref.n_vocab;
    EngineSpread s;
    double abs_sum = 0, ref_sum = 0, p_sq = 0;
    for (size_t c = 0; c < ref.cases.size(); ++c) {
        const auto sequence = [&](const test::ReferenceCase& rc) {
            std::vector<int32_t> t = rc.prompt_tokens;
            t.insert(t.end(), rc.greedy_tokens.begin(), rc.greedy_tokens.end() - 1);
            return t;
        };
        const std::vector<int32_t> a = sequence(ref_base.cases[c]), b = sequence(ref.cases[c]);
        size_t same = 0;
        while (same < a.size() && same < b.size() && a[same] == b[same]) ++same;
        std::vector<BatchToken> batch;
        for (size_t i = 0; i < same; ++i) batch.push_back({0, a[i], static_cast<int32_t>(i), true});
        base.truncate(0, 0);
        model.truncate(0, 0);
        const std::span<const float> ours_base = base.decode(batch), ours = model.decode(batch);
        const auto row = [&](std::span<const float> rows, size_t j) { return rows.subspan(j * n_vocab, n_vocab); };
        for (size_t j = 0; j + 1 < same; ++j) {
            const TokenComparison o = compare_rows(row(ours_base, j), row(ours, j), a[j + 1]);
            const TokenComparison r =
                compare_rows(row(ref_base.cases[c].logits, j), row(ref.cases[c].logits, j), a[j + 1]);
            const double d = std::fabs(o.kld - r.kld);
            abs_sum += d;
            ref_sum += r.kld;
            s.kld_max_rel = std::max(s.kld_max_rel, d / r.kld);
            p_sq += (o.p_diff - r.p_diff) * (o.p_diff - r.p_diff);
            s.top_flips += o.same_top != r.same_top;
            ++s.rows;
        }
    }
    s.kld_mean_rel = abs_sum / ref_sum;
    s.p_diff_rms = std::sqrt(p_sq / static_cast<double>(s.rows));
    return s;
}

// The key `deskside score --json` gives a quantile ("max", "p99_9", "median").
std::string json_key(double fraction) {
    if (fraction >= 1) return "max";
    if (fraction <= 0) return "min";
    if (fraction == 0.5) return "median";
    char buf[32];
    std::snprintf(buf, sizeof buf, "p%g", 100 * fraction);
    std::string key = buf;
    std::replace(key.begin(), key.end(), '.', '_');
    return key;
}

// The JSON of one `deskside score` run over the F32 base, Q8_0 and Q4_0: the acceptance run.
const nlohmann::json& lockstep_run() {
    static const nlohmann::json j = [] {
        const std::string out = (std::filesystem::temp_directory_path() /
                                 ("deskside-test-score-" + std::to_string(getpid()) + ".json")).string();
        const test::ProcessResult r = test::run_deskside(
            {"score", "-m", model_path("stories260K"), "-m", model_path("stories260K-q8_0"), "-m",
             model_path("stories260K-q4_0"), "--text", shared_path("reference/ppl-text-gpl3.txt"), "-c", "128", "-t", "2",
             "--json", out});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        std::ifstream in(out);
        nlohmann::json parsed = nlohmann::json::parse(in);
        std::filesystem::remove(out);
        return parsed;
    }();
    return j;
}

std::vector<int32_t> text_tokens() {
    std::ifstream in(shared_path("reference/ppl-text-gpl3.txt"), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return models::Tokenizer::load(model_path("stories260K"))->encode(ss.str(), true, false);
}

}  // namespace

TEST_CASE("score --text: one lockstep run gives llama-perplexity's PPL within 0.1% for F32, Q8_0 and Q4_0", "[score]") {
    const nlohmann::json& j = lockstep_run();
    // ../shared/reference/README.md's table; the Q files' "Mean PPL(Q)" lines repeat them.
    const struct {
        const char* stem;
        double ppl;
    } kCases[] = {{"stories260K", 105.3245}, {"stories260K-q8_0", 105.3610}, {"stories260K-q4_0", 113.1851}};
    REQUIRE(j["models"].size() == 3);
    for (size_t i = 0; i < 3; ++i) {
        const nlohmann::json& m = j["models"][i];
        INFO(kCases[i].stem << ": ours " << m["ppl"]["value"] << ", llama-perplexity " << kCases[i].ppl);
        CHECK(m["path"] == model_path(kCases[i].stem));
        CHECK(m["ppl"]["n_chunks"] == 173);
        CHECK(m["ppl"]["n_scored"] == 173 * 63);
        CHECK(std::fabs(m["ppl"]["value"].get<double>() / kCases[i].ppl - 1) <= 1e-3);
        if (i > 0) {
            const auto llama = read_llama_report(shared_path(std::string("reference/kld/") + kCases[i].stem + ".txt"));
            CHECK(std::fabs(m["kld_vs_base"]["ppl"]["value"].get<double>() / llama.at("Mean PPL(Q)") - 1) <= 1e-3);
        }
    }
}

TEST_CASE("score --text: KLD, top-1 and Δp against F32 agree with llama-perplexity --kl-divergence", "[score]") {
    const nlohmann::json& j = lockstep_run();
    const std::vector<int32_t> tokens = text_tokens();
    backends::cpu::CpuBackend backend(2);
    EngineOptions opt;
    opt.cache.n_positions = 128;
    opt.n_batch = 128;
    Model base(models::load_model(model_path("stories260K")), backend, opt);
    const TextChunks chunks(tokens, 128, models::Tokenizer::load(model_path("stories260K"))->bos());
    for (const auto& [index, stem] : {std::pair{1, "stories260K-q8_0"}, std::pair{2, "stories260K-q4_0"}}) {
        Model model(models::load_model(model_path(stem)), backend, opt);
        const StorageBound sb = storage_bound(base, model, chunks);
        const EngineSpread es = engine_spread(base, model, stem);
        const auto llama = read_llama_report(shared_path(std::string("reference/kld/") + stem + ".txt"));
        const nlohmann::json& k = j["models"][index]["kld_vs_base"];
        const auto n = static_cast<double>(k["n_tokens"].get<int64_t>());
        INFO(stem << ": storage bound on mean KLD " << sb.kld_mean << ", on a quantile " << sb.kld_max << ", "
                  << sb.top_ties << " near-tied base argmaxes, Δp " << sb.p_diff_max << "; engine over " << es.rows
                  << " reference rows: mean KLD " << es.kld_mean_rel << " relative, at most " << es.kld_max_rel
                  << ", RMS Δp " << es.p_diff_rms << ", " << es.top_flips << " top-1 flips");
        REQUIRE(es.rows >= 80);
        CHECK(k["n_tokens"] == 173 * 63);

        // The floor reproduces llama-perplexity's storage-affected PPL(base) from our logits.
        CHECK(std::fabs(sb.ppl_base_floored / llama.at("Mean PPL(base)") - 1) <= 1e-3);

        // llama-perplexity prints KLD with 6 decimals, Δp and the top-1 share in percent with 3.
        constexpr double kKldDigit = 5e-7, kPercentDigit = 5e-6;
        const double kld = k["kld"]["mean"].get<double>(), llama_kld = llama.at("Mean    KLD");
        INFO("mean KLD: ours " << kld << ", llama.cpp " << llama_kld);
        CHECK(std::fabs(kld - llama_kld) <= sb.kld_mean + es.kld_mean_rel * llama_kld + kKldDigit);
        for (const double f : kKldFractions) {
            const std::string label = llama_label(f, "KLD");
            const double ours = k["kld"]["quantiles"][json_key(f)].get<double>();
            const double theirs = llama.at(label);
            INFO(label << ": ours " << ours << ", llama.cpp " << theirs);
            CHECK(std::fabs(ours - theirs) <= es.kld_max_rel * std::fabs(theirs) + sb.kld_max + kKldDigit);
        }

        // Top-1: the near ties the storage can flip, and the engine's flip rate at its 95% upper limit
        // (flips + 3 over the rows: the rule of three when none were seen).
        const double top = k["same_top"]["value"].get<double>(), llama_top = llama.at("Same top p") / 100;
        const double flip_rate = static_cast<double>(es.top_flips + 3) / static_cast<double>(es.rows);
        INFO("same top: ours " << top << ", llama.cpp " << llama_top);
        CHECK(std::fabs(top - llama_top) <= static_cast<double>(sb.top_ties) / n + flip_rate + kPercentDigit);

        const double rms = k["p_diff_rms"]["value"].get<double>(), llama_rms = llama.at("RMS Δp") / 100;
        INFO("RMS Δp: ours " << rms << ", llama.cpp " << llama_rms);
        CHECK(std::fabs(rms - llama_rms) <= es.p_diff_rms + sb.p_diff_max + kPercentDigit);
    }
}

TEST_CASE("KldAccumulator: llama-perplexity's formulas on hand-made rows", "[score]") {
    // Identical rows: KLD 0, Δp 0, same top; a row and its shifted copy are the same distribution.
    const std::vector<float> a = {1, 2, 3, 0.5f}, shifted = {11, 12, 13, 10.5f}, flat = {0, 0, 0, 0};
    TokenComparison t = compare_rows(a, shifted, 2);
    CHECK(t.kld == Approx(0).margin(1e-12));
    CHECK(t.p_diff == Approx(0).margin(1e-12));
    CHECK(t.same_top);
    CHECK(t.nll == Approx(t.nll_base));
    // Against the uniform distribution KL(p || u) = log 4 - H(p).
    t = compare_rows(a, flat, 0);
    double h = 0, z = 0;
    for (float x : a) z += std::exp(x);
    for (float x : a) h -= std::exp(x) / z * std::log(std::exp(x) / z);
    CHECK(t.kld == Approx(std::log(4.0) - h));
    CHECK(t.nll == Approx(std::log(4.0)));
    CHECK(t.p_diff == Approx(0.25 - std::exp(1.0) / z));
    CHECK_FALSE(t.same_top);  // the flat row's argmax is its first index, a's is 2

    // Percentiles interpolate at f·(n-1): the median of an even count is the mean of the middle two.
    const std::vector<double> v = {1, 2, 4, 8};
    CHECK(percentile(v, 0.5) == 3);
    CHECK(percentile(v, 0) == 1);
    CHECK(percentile(v, 1) == 8);
    CHECK(percentile(v, 0.9) == Approx(4 + 0.7 * 4));

    KldAccumulator acc;
    acc.add({2, 3, 0.5, -0.25, true});
    acc.add({1, 1, 0.0, 0.25, false});
    const KldStats s = acc.stats();
    CHECK(s.n == 2);
    CHECK(s.kld.value == Approx(0.25));
    CHECK(s.kld.stderr_value == Approx(0.25));  // sqrt((E[x²] - E[x]²) / (n - 1))
    CHECK(s.same_top.value == 0.5);
    CHECK(s.p_diff_rms.value == Approx(0.25));
    CHECK(s.ppl.value == Approx(std::exp(2.0)));
    CHECK(s.ppl_base.value == Approx(std::exp(1.5)));
    CHECK(s.ln_ppl_ratio.value == Approx(0.5));
    CHECK(s.ln_ppl_correlation == Approx(1));  // the two NLL columns rise together
    CHECK_THROWS_AS(KldAccumulator().stats(), std::logic_error);
}

TEST_CASE("mc_tokens and McAccumulator follow lm-evaluation-harness", "[score]") {
    const auto tok = models::Tokenizer::load(model_path("stories260K"));
    const auto encode = [&](const std::string& s) { return tok->encode(s, false, true); };
    // Context tokens alone, then what encoding context + " " + choice adds past them.
    McItem item{"Lily had a red ball.", {"She threw it.", "It flew."}, 0};
    McTokens t = mc_tokens(*tok, item);
    CHECK(t.context == encode("Lily had a red ball."));
    const std::vector<int32_t> whole = encode("Lily had a red ball. She threw it.");
    CHECK(t.continuations[0] == std::vector<int32_t>(whole.begin() + static_cast<std::ptrdiff_t>(t.context.size()), whole.end()));
    // Trailing whitespace of the context moves to the continuation (Python's rstrip, Unicode spaces too).
    item.context = "Lily had a red ball.\u00a0 ";
    t = mc_tokens(*tok, item);
    CHECK(t.context == encode("Lily had a red ball."));
    const std::vector<int32_t> moved = encode("Lily had a red ball.\u00a0  She threw it.");
    CHECK(t.continuations[0] == std::vector<int32_t>(moved.begin() + static_cast<std::ptrdiff_t>(t.context.size()), moved.end()));
    // An empty context is the BOS token.
    item.context = "";
    t = mc_tokens(*tok, item);
    CHECK(t.context == std::vector<int32_t>{*tok->bos()});
    CHECK(t.continuations[1] == encode(" It flew."));
    item.context = "  ";
    CHECK_THROWS_AS(mc_tokens(*tok, item), std::invalid_argument);

    // acc: argmax of the log-likelihoods; acc_norm: of log-likelihood / characters (code points:
    // "é" is one), the first maximum winning either way.
    McAccumulator acc;
    acc.add({"", {"ab", "\u00e9\u00e9"}, 0}, std::vector<double>{-2.0, -3.0});  // acc 1; norm -1 vs -1.5 (bytes: -0.75): 1
    acc.add({"", {"x", "y"}, 0}, std::vector<double>{-1.0, -1.0});              // ties: the first wins, 1 and 1
    acc.add({"", {"x", "yy"}, 1}, std::vector<double>{-1.0, -1.8});             // acc 0; norm -1 vs -0.9: 1
    const McStats s = acc.stats();
    CHECK(s.n == 3);
    CHECK(s.acc.value == Approx(2.0 / 3));
    CHECK(s.acc_norm.value == 1);
    // lm-eval's mean_stderr: sample standard deviation / sqrt(n).
    CHECK(s.acc.stderr_value == Approx(std::sqrt((2 * (1.0 / 9) + 4.0 / 9) / 2) / std::sqrt(3.0)));
    CHECK(s.acc_norm.stderr_value == 0);
}

}  // namespace deskside::engine
