// What `deskside score` prints and writes: the table on stdout, llama-perplexity's statistics
// blocks for each model compared with the base, and the --csv, --json and --plot files. The files
// are written all or none: each goes to a temporary name beside its target and is renamed into
// place only when every one of them was written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/perplexity.h"
#include "engine/score.h"

namespace deskside::cli {

struct ScoredModel {
    std::string path;
    std::string label;  // the file name, for the table and the plot
    uint64_t file_size = 0;
    int64_t n_params = 0;
    double bits_per_weight = 0;  // tensor bytes · 8 / tensor elements
    std::optional<engine::PerplexityResult> ppl;
    std::optional<engine::KldStats> kld;  // against the base (every model but the first)
    std::string kld_missing;              // why a compared model has no KLD (another vocabulary)
    std::optional<engine::McStats> tasks;
    int64_t tokens_decoded = 0;
    double decode_seconds = 0;

    double tokens_per_second() const { return decode_seconds > 0 ? tokens_decoded / decode_seconds : 0; }
};

struct ScoreReport {
    std::optional<std::string> text_path;
    int64_t n_ctx = 0;
    std::optional<std::string> tasks_path;
    std::vector<ScoredModel> models;  // the base first
};

// One aligned table, a row per model.
std::string format_table(const ScoreReport& report);
// The three statistics blocks llama-perplexity --kl-divergence prints, in its layout.
std::string format_kld_stats(const engine::KldStats& s);

std::string report_json(const ScoreReport& report);
std::string report_csv(const ScoreReport& report);
// Perplexity against file size, one labelled point per model. Needs every model's PPL.
std::string report_svg(const ScoreReport& report);

// Writes each (path, contents) to a temporary file beside it, then renames them all into place;
// a target that is a folder fails before anything is written.
// On any failure removes what it wrote and throws std::runtime_error naming the path.
void write_all_or_nothing(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace deskside::cli
