// deskside score -m BASE -m A -m B ... --text FILE | --tasks FILE.jsonl: compares checkpoints.
//
// --text: every model's perplexity as llama-perplexity computes it, and for each model after the
// first, llama-perplexity --kl-divergence's statistics against the first (engine/score.h). The
// models run in lockstep, chunk by chunk: the base decodes a chunk, then each other model decodes
// the same chunk and is compared with the base's rows, so the base's logits live for one chunk
// only and N checkpoints cost one pass of the base. A model whose vocabulary differs from the
// base's gets its perplexity on its own tokenization and no KLD (with a warning).
// --tasks: multiple-choice accuracy by log-likelihood, as lm-evaluation-harness scores it.
//
// Everything is read and checked before any model is loaded, and the output files are written
// only when every model has been scored (cli/score_report.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/score_report.h"
#include "engine/perplexity.h"
#include "engine/score.h"
#include "models/model.h"
#include "models/store/resolve.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path, const std::string& flag) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(flag + " " + path + ": cannot open the file");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The string array field `key` of a task line (or its alias), or throws naming the line.
std::vector<std::string> string_array(const nlohmann::json& j, const std::string& where, const char* key,
                                      const char* alias) {
    const bool has_key = j.contains(key), has_alias = j.contains(alias);
    if (has_key == has_alias)
        throw std::runtime_error(where + ": give \"" + key + "\" (or \"" + alias + "\"), once");
    const nlohmann::json& v = j[has_key ? key : alias];
    if (!v.is_array() || v.size() < 2) throw std::runtime_error(where + ": \"" + key + "\" must be an array of 2 or more strings");
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string() || v[i].get<std::string>().empty())
            throw std::runtime_error(where + ": \"" + key + "\"[" + std::to_string(i) + "] must be a non-empty string");
        out.push_back(v[i].get<std::string>());
    }
    return out;
}

// One JSON object a line: {"context": ..., "choices": [...], "gold": i}; "endings" and "label"
// are read as "choices" and "gold" (HellaSwag's names, and tests/eval/stories_mc.jsonl's). Blank
// lines are skipped.
std::vector<engine::McItem> read_tasks(const std::string& path) {
    std::istringstream in(read_file(path, "--tasks"));
    std::vector<engine::McItem> items;
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = path + ":" + std::to_string(n);
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
            throw std::runtime_error(where + ": malformed JSON (" + e.what() + ")");
        }
        if (!j.is_object()) throw std::runtime_error(where + ": a task line must be a JSON object");
        engine::McItem item;
        if (!j.contains("context") || !j["context"].is_string())
            throw std::runtime_error(where + ": \"context\" must be a string");
        item.context = j["context"].get<std::string>();
        item.choices = string_array(j, where, "choices", "endings");
        const char* gold_key = j.contains("gold") ? "gold" : "label";
        if (!j.contains(gold_key) || !j[gold_key].is_number_integer())
            throw std::runtime_error(where + ": \"gold\" (or \"label\") must be an integer");
        item.gold = j[gold_key].get<int64_t>();
        if (item.gold < 0 || item.gold >= static_cast<int64_t>(item.choices.size()))
            throw std::runtime_error(where + ": gold index " + std::to_string(item.gold) + " is out of range for " +
                                     std::to_string(item.choices.size()) + " choices");
        items.push_back(std::move(item));
    }
    if (items.empty()) throw std::runtime_error("--tasks " + path + ": no tasks in the file");
    return items;
}

bool same_vocabulary(const models::Tokenizer& a, const models::Tokenizer& b) {
    if (a.n_vocab() != b.n_vocab()) return false;
    for (int32_t i = 0; i < a.n_vocab(); ++i)
        if (a.token_text(i) != b.token_text(i)) return false;
    return true;
}

std::string file_name(const std::string& path) {
    const std::string name = std::filesystem::path(path).filename().string();
    return name.empty() ? path : name;
}

// Fails before any work when an output file's folder does not exist.
void check_output_path(const std::optional<std::string>& path, const char* flag) {
    if (!path) return;
    const std::filesystem::path parent = std::filesystem::path(*path).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent))
        throw UsageError(std::string(flag) + " " + *path + ": the folder " + parent.string() + " does not exist");
}

// A progress bar with an ETA on stderr, only when stderr is a terminal.
class Progress {
   public:
    Progress(const char* what, int64_t total) : what_(what), total_(total), on_(isatty(STDERR_FILENO)) {}
    void step() {
        ++done_;
        if (!on_) return;
        const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
        const double eta = elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_);
        constexpr int kBar = 30;
        const auto filled = static_cast<int>(kBar * done_ / std::max<int64_t>(total_, 1));
        std::fprintf(stderr, "\r%s [%s%s] %lld/%lld  ETA %dm%02ds ", what_, std::string(filled, '#').c_str(),
                     std::string(kBar - filled, '.').c_str(), static_cast<long long>(done_),
                     static_cast<long long>(total_), static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
        if (done_ == total_) std::fprintf(stderr, "\n");
    }

   private:
    const char* what_;
    int64_t total_, done_ = 0;
    bool on_;
    Clock::time_point start_ = Clock::now();
};

// A model being scored: its file until it is loaded, then the loaded model, its tokens and results.
struct Candidate {
    models::ModelFile file;
    engine::LoadedModel loaded;
    bool same_vocab = true;              // as the base's: it is compared with the base
    std::vector<int32_t> text_tokens;    // the base's, and a model's with another vocabulary
    std::vector<engine::McTokens> tasks;
    ScoredModel result;
};

// Runs `f` and adds its time and `n_tokens` to the model's throughput.
template <typename F>
auto timed(Candidate& c, int64_t n_tokens, F&& f) {
    const auto t0 = Clock::now();
    auto out = f();
    c.result.decode_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    c.result.tokens_decoded += n_tokens;
    return out;
}

void score_text(std::vector<Candidate>& models, int64_t n_ctx) {
    const auto chunks_of = [&](const Candidate& c) {
        const auto& t = c.same_vocab ? models.front().text_tokens : c.text_tokens;
        return engine::TextChunks(t, n_ctx, c.loaded.tokenizer->bos());
    };
    std::vector<engine::TextChunks> chunks;
    int64_t n_chunks = 0, total = 0;
    for (const Candidate& c : models) {
        chunks.push_back(chunks_of(c));
        n_chunks = std::max(n_chunks, chunks.back().n_chunks());
        total += chunks.back().n_chunks();
    }
    std::vector<engine::MeanEstimate> nll(models.size());
    std::vector<engine::KldAccumulator> kld(models.size());
    Progress progress("score --text", total);
    for (int64_t c = 0; c < n_chunks; ++c) {
        std::span<const float> base_rows;  // the base's logits of chunk c, until its next decode
        for (size_t m = 0; m < models.size(); ++m) {
            if (c >= chunks[m].n_chunks()) continue;
            engine::Model& model = *models[m].loaded.model;
            const std::span<const float> rows =
                timed(models[m], n_ctx, [&] { return engine::decode_chunk(model, chunks[m], c); });
            if (m == 0) base_rows = rows;
            const std::span<const int32_t> targets = chunks[m].targets(c);
            const int64_t n_vocab = model.n_vocab();
            for (int64_t i = 0; i < chunks[m].n_scored(); ++i) {
                const std::span<const float> row = rows.subspan(i * n_vocab, n_vocab);
                if (m == 0 || !models[m].same_vocab) {
                    nll[m].add(engine::log_sum_exp(row) - row[targets[i]]);
                    continue;
                }
                const engine::TokenComparison t =
                    engine::compare_rows(base_rows.subspan(i * n_vocab, n_vocab), row, targets[i]);
                nll[m].add(t.nll);
                kld[m].add(t);
            }
            progress.step();
        }
    }
    for (size_t m = 0; m < models.size(); ++m) {
        models[m].loaded.model->truncate(0, 0);
        models[m].result.ppl = engine::perplexity_result(nll[m], chunks[m].n_chunks());
        if (m > 0 && models[m].same_vocab) models[m].result.kld = kld[m].stats();
    }
}

void score_tasks(std::vector<Candidate>& models, const std::vector<engine::McItem>& items) {
    Progress progress("score --tasks", static_cast<int64_t>(models.size() * items.size()));
    for (Candidate& c : models) {
        engine::McAccumulator acc;
        for (size_t i = 0; i < items.size(); ++i) {
            const engine::McTokens& t = c.tasks[i];
            int64_t n_tokens = static_cast<int64_t>(t.context.size()) - 1;
            for (const auto& cont : t.continuations) n_tokens += static_cast<int64_t>(cont.size());
            const std::vector<double> lls =
                timed(c, n_tokens, [&] { return engine::mc_loglikelihoods(*c.loaded.model, t); });
            acc.add(items[i], lls);
            progress.step();
        }
        c.result.tasks = acc.stats();
    }
}


double bits_per_weight(const models::ModelInfo& info) {
    uint64_t bytes = 0;
    for (const models::Tensor& t : info.tensors) bytes += t.n_bytes;
    const int64_t n = info.n_params();
    return n > 0 ? 8.0 * static_cast<double>(bytes) / static_cast<double>(n) : 0;
}

// Opens every file and tokenizes the input for it before any weights are loaded, so that bad input
// fails fast. The base's text tokens are in models[0].text_tokens; a model with the base's
// vocabulary uses them, one with another vocabulary has its own.
std::vector<Candidate> open_models(const std::vector<std::string>& paths, const std::string* text, int64_t n_ctx,
                                   const std::vector<engine::McItem>& items) {
    std::vector<Candidate> models(paths.size());
    for (size_t m = 0; m < paths.size(); ++m) {
        Candidate& c = models[m];
        const std::string path = models::store::resolve_model(paths[m]);
        c.file = models::open_model_file(path);
        c.result.path = path;
        c.result.label = file_name(path);
        c.result.file_size = c.file.info.file_size;
        c.result.n_params = c.file.info.n_params();
        c.result.bits_per_weight = bits_per_weight(c.file.info);
        const models::Tokenizer& tok = *c.file.tokenizer;
        c.same_vocab = m == 0 || same_vocabulary(*models[0].file.tokenizer, tok);
        if (text && !c.same_vocab) {
            c.result.kld_missing = "KLD needs one vocabulary: " + c.result.label + " has " +
                                   std::to_string(tok.n_vocab()) + " tokens unlike the base's " +
                                   std::to_string(models[0].file.tokenizer->n_vocab());
            std::fprintf(stderr, "deskside score: warning: %s; reporting its perplexity only\n",
                         c.result.kld_missing.c_str());
        }
        if (text && (m == 0 || !c.same_vocab)) {
            c.text_tokens = tok.encode(*text, true, false);
            const auto n = static_cast<int64_t>(c.text_tokens.size());
            if (n < n_ctx)
                throw std::runtime_error("the --text file is " + std::to_string(n) + " tokens for " + c.result.label +
                                         ", shorter than one chunk of -c " + std::to_string(n_ctx));
        }
        for (const engine::McItem& item : items) {
            try {
                c.tasks.push_back(engine::mc_tokens(tok, item));
            } catch (const std::invalid_argument& e) {
                throw std::runtime_error("--tasks: task " + std::to_string(c.tasks.size() + 1) + " for " +
                                         c.result.label + ": " + e.what());
            }
        }
    }
    return models;
}

int run(Args& args) {
    const std::vector<std::string> paths = args.values("--model", "-m");
    const auto text_path = args.value("--text");
    const auto tasks_path = args.value("--tasks");
    const long long n_ctx = args.int_value("--ctx-size", "-c").value_or(512);
    const long long threads = args.int_value("--threads", "-t").value_or(0);
    const auto csv_path = args.value("--csv");
    const auto json_path = args.value("--json");
    const auto plot_path = args.value("--plot");
    const DeviceFlags devices = read_device_flags(args);
    args.finish();
    if (paths.empty()) throw UsageError("give at least one model: -m BASE [-m MODEL ...]");
    if (!text_path && !tasks_path) throw UsageError("give --text FILE and/or --tasks FILE.jsonl");
    if (n_ctx < 4) throw UsageError("--ctx-size must be at least 4");
    if (threads < 0) throw UsageError("--threads must be >= 0");
    if (plot_path && !text_path) throw UsageError("--plot draws perplexity, which needs --text");
    check_output_path(csv_path, "--csv");
    check_output_path(json_path, "--json");
    check_output_path(plot_path, "--plot");

    const std::string text = text_path ? read_file(*text_path, "--text") : std::string();
    const std::vector<engine::McItem> items = tasks_path ? read_tasks(*tasks_path) : std::vector<engine::McItem>{};

    std::vector<Candidate> models = open_models(paths, text_path ? &text : nullptr, n_ctx, items);

    for (Candidate& c : models) {
        engine::EngineOptions opt;
        int64_t positions = text_path ? n_ctx : 1;
        for (const engine::McTokens& t : c.tasks)
            for (const auto& cont : t.continuations)
                positions = std::max<int64_t>(positions, static_cast<int64_t>(t.context.size() + cont.size()));
        opt.cache.n_positions = positions;
        c.loaded = load_on_devices(std::move(c.file), devices, opt, 1, static_cast<int>(threads));
    }
    if (text_path) score_text(models, n_ctx);
    if (tasks_path) score_tasks(models, items);

    ScoreReport report;
    report.text_path = text_path;
    report.n_ctx = n_ctx;
    report.tasks_path = tasks_path;
    for (Candidate& c : models) report.models.push_back(std::move(c.result));

    std::vector<std::pair<std::string, std::string>> files;
    if (csv_path) files.emplace_back(*csv_path, report_csv(report));
    if (json_path) files.emplace_back(*json_path, report_json(report));
    if (plot_path) files.emplace_back(*plot_path, report_svg(report));
    write_all_or_nothing(files);

    std::string out = format_table(report);
    for (const ScoredModel& m : report.models)
        if (m.kld) out += "\n== " + m.label + " against " + report.models.front().label + "\n" + format_kld_stats(*m.kld);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}  // namespace

const Command kScoreCommand{
    "score",
    "perplexity, KL divergence against a base model, multiple-choice accuracy",
    "usage: deskside score -m BASE [-m MODEL ...] (--text FILE | --tasks FILE.jsonl) [options]\n"
    "\n"
    "Scores every model on the same input and prints one table (docs/SCORING.md).\n"
    "  -m, --model PATH         a model; the first is the base the others are compared with\n"
    "  --text FILE              perplexity as llama-perplexity computes it (chunks of -c tokens,\n"
    "                           the second half of each scored) and, for each model after the\n"
    "                           first, llama-perplexity --kl-divergence's statistics against it\n"
    "  --tasks FILE.jsonl       multiple choice by log-likelihood, one object a line:\n"
    "                           {\"context\": ..., \"choices\": [...], \"gold\": i}; acc and\n"
    "                           acc_norm as lm-evaluation-harness computes them\n"
    "  -c, --ctx-size N         tokens per --text chunk (default 512)\n"
    "  -t, --threads N          CPU threads (default: physical cores)\n"
    DESKSIDE_DEVICE_FLAGS_HELP
    "  --csv FILE, --json FILE  the results as CSV (a row per model) or JSON (everything)\n"
    "  --plot FILE.svg          perplexity against file size, a labelled point per model\n",
    run,
};

}  // namespace deskside::cli
