#include "llama_cpp_spread.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "support/paths.h"

namespace deskside::test {
namespace {

std::string trim(std::string_view s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string_view::npos) return "";
    return std::string(s.substr(b, s.find_last_not_of(" \t") - b + 1));
}

// "a | b | c" -> {"a", "b", "c"}, for a markdown row "| a | b | c |".
std::vector<std::string> split(std::string_view s, char sep) {
    std::vector<std::string> out;
    size_t begin = 0;
    while (true) {
        const size_t end = s.find(sep, begin);
        out.push_back(trim(s.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin)));
        if (end == std::string_view::npos) return out;
        begin = end + 1;
    }
}

double number(const std::string& s, const std::string& where) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(s, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != s.size()) throw std::runtime_error(where + ": '" + s + "' is not a number");
    return v;
}

// SPREAD.md prints mean KL to two significant digits, dropping trailing zeros ("6.7e-07", "0.001",
// "2e-07"): half a unit of the second digit (5e-09, 5e-05, 5e-09), 0 for a printed 0.
double kl_rounding(double value) {
    if (value == 0) return 0;
    return 0.5 * std::pow(10.0, std::floor(std::log10(value)) - 1);
}

// "0.022 / 0.00727 / 6.7e-07 / 100.0%" over `rows` rows.
SpreadCell parse_cell(const std::string& cell, int64_t rows, const std::string& where) {
    const std::vector<std::string> parts = split(cell, '/');
    if (parts.size() != 4 || parts[3].empty() || parts[3].back() != '%')
        throw std::runtime_error(where + ": expected 'max abs / mean row max / mean KL / top-1%', got '" + cell + "'");
    SpreadCell c;
    c.max_abs = number(parts[0], where);
    c.mean_row_max = number(parts[1], where);
    c.mean_kl = number(parts[2], where);
    c.mean_kl_rounding = kl_rounding(c.mean_kl);
    const double top1 = number(parts[3].substr(0, parts[3].size() - 1), where);
    // Printed to 0.1 %; one row is more than 0.1 % of any file here (at most 1,000 rows), so the
    // nearest whole number of rows is the count that was measured.
    c.top1_disagreements = std::llround((100.0 - top1) / 100.0 * static_cast<double>(rows));
    return c;
}

}  // namespace

std::map<std::string, LlamaCppSpread> llama_cpp_spread_table() {
    const std::string path = shared_path("reference/SPREAD.md");
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::map<std::string, LlamaCppSpread> table;
    std::string line;
    bool in_per_file = false;
    while (std::getline(in, line)) {
        if (line.rfind("## ", 0) == 0) in_per_file = line == "## Per file";
        if (!in_per_file || line.rfind("| ", 0) != 0) continue;
        // | file | rows | (iii) | (iii) prompt · generated | (i) |
        const std::vector<std::string> cells = split(std::string_view(line).substr(1), '|');
        if (cells.empty() || cells[0] == "file") continue;
        const std::string where = path + ", row " + cells[0];
        if (cells.size() < 5)
            throw std::runtime_error(where + ": expected 5 cells, got " + std::to_string(cells.size()));
        LlamaCppSpread s;
        s.rows = static_cast<int64_t>(number(cells[1], where));
        s.reference_build = parse_cell(cells[2], s.rows, where + " (iii)");
        s.avx2_build = parse_cell(cells[4], s.rows, where + " (i)");
        table[cells[0]] = s;
    }
    if (table.empty()) throw std::runtime_error(path + " has no \"## Per file\" table");
    return table;
}

LlamaCppSpread llama_cpp_spread(const std::string& stem) {
    const std::map<std::string, LlamaCppSpread> table = llama_cpp_spread_table();
    const auto it = table.find(stem);
    if (it == table.end())
        throw std::runtime_error(shared_path("reference/SPREAD.md") + " has no \"Per file\" row for " + stem +
                                 ": the engine cannot be judged against llama.cpp's spread on it");
    return it->second;
}

ClosenessBar closeness_bar(const LlamaCppSpread& spread) {
    const SpreadCell& a = spread.reference_build;
    const SpreadCell& b = spread.avx2_build;
    ClosenessBar bar;
    bar.mean_kl = std::max(a.mean_kl + a.mean_kl_rounding, b.mean_kl + b.mean_kl_rounding);
    if (bar.mean_kl == 0) bar.mean_kl = kExactMeanKlMargin;
    bar.top1_disagreements = std::max(a.top1_disagreements, b.top1_disagreements);
    if (bar.top1_disagreements == 0)
        bar.top1_disagreements = static_cast<int64_t>(std::floor(kExactTop1Margin * static_cast<double>(spread.rows)));
    bar.max_abs = std::max(kSanityFloor, kSanityFactor * std::max(a.max_abs, b.max_abs));
    return bar;
}

}  // namespace deskside::test
