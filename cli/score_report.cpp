#include "cli/score_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace deskside::cli {
namespace {

using nlohmann::ordered_json;

std::string format(const char* fmt, auto... args) {
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, args...);
    return buf;
}

// The row label llama-perplexity gives a quantile, eight columns wide ("99.9%   ", "Median  ").
std::string quantile_label(double fraction) {
    if (fraction >= 1) return "Maximum ";
    if (fraction <= 0) return "Minimum ";
    if (fraction == 0.5) return "Median  ";
    return format("%4.1f%%   ", 100 * fraction);
}

// "99.9", "max", "median": the key of a quantile in the JSON and CSV.
std::string quantile_key(double fraction) {
    if (fraction >= 1) return "max";
    if (fraction <= 0) return "min";
    if (fraction == 0.5) return "median";
    std::string s = format("p%g", 100 * fraction);
    std::replace(s.begin(), s.end(), '.', '_');
    return s;
}

double quantile(const std::vector<engine::Quantile>& qs, double fraction) {
    for (const engine::Quantile& q : qs)
        if (q.fraction == fraction) return q.value;
    throw std::logic_error("no quantile " + std::to_string(fraction));
}

ordered_json estimate_json(const engine::Estimate& e) { return {{"value", e.value}, {"stderr", e.stderr_value}}; }

ordered_json quantiles_json(const std::vector<engine::Quantile>& qs) {
    ordered_json j = ordered_json::object();
    for (const engine::Quantile& q : qs) j[quantile_key(q.fraction)] = q.value;
    return j;
}

ordered_json kld_json(const engine::KldStats& s) {
    return {{"n_tokens", s.n},
            {"ppl", estimate_json(s.ppl)},
            {"ppl_base", estimate_json(s.ppl_base)},
            {"ln_ppl_correlation", s.ln_ppl_correlation},
            {"ln_ppl_ratio", estimate_json(s.ln_ppl_ratio)},
            {"ppl_ratio", estimate_json(s.ppl_ratio)},
            {"ppl_diff", estimate_json(s.ppl_diff)},
            {"kld", {{"mean", s.kld.value}, {"stderr", s.kld.stderr_value}, {"quantiles", quantiles_json(s.kld_quantiles)}}},
            {"p_diff",
             {{"mean", s.p_diff.value}, {"stderr", s.p_diff.stderr_value}, {"quantiles", quantiles_json(s.p_diff_quantiles)}}},
            {"p_diff_rms", estimate_json(s.p_diff_rms)},
            {"same_top", estimate_json(s.same_top)}};
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string out = "\"";
    for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

std::string xml_escape(const std::string& s) {
    std::string out;
    for (const char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

// Axis ticks at a 1-2-5 step covering [lo, hi] with about five intervals.
std::vector<double> ticks(double lo, double hi) {
    if (hi - lo <= 0) {
        const double pad = std::max(std::fabs(lo) * 0.05, 1e-6);
        lo -= pad;
        hi += pad;
    }
    const double raw = (hi - lo) / 5;
    const double mag = std::pow(10, std::floor(std::log10(raw)));
    const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
    std::vector<double> out;
    for (double t = std::floor(lo / step) * step; t <= hi + step * 0.999; t += step) out.push_back(t);
    return out;
}

}  // namespace

std::string format_table(const ScoreReport& report) {
    const std::vector<std::string> head = {"model", "size MiB", "bpw", "PPL", "KLD mean", "KLD p99", "KLD max",
                                           "top-1 %", "acc", "acc_norm", "tokens/s"};
    std::vector<std::vector<std::string>> rows = {head};
    for (const ScoredModel& m : report.models) {
        const auto or_dash = [](bool have, const std::string& s) { return have ? s : std::string("-"); };
        const engine::KldStats* k = m.kld ? &*m.kld : nullptr;
        rows.push_back({m.label, format("%.2f", m.file_size / 1048576.0), format("%.2f", m.bits_per_weight),
                        or_dash(m.ppl.has_value(), m.ppl ? format("%.4f", m.ppl->ppl) : ""),
                        or_dash(k, k ? format("%.6f", k->kld.value) : ""),
                        or_dash(k, k ? format("%.6f", quantile(k->kld_quantiles, 0.99)) : ""),
                        or_dash(k, k ? format("%.6f", quantile(k->kld_quantiles, 1)) : ""),
                        or_dash(k, k ? format("%.2f", 100 * k->same_top.value) : ""),
                        or_dash(m.tasks.has_value(), m.tasks ? format("%.4f", m.tasks->acc.value) : ""),
                        or_dash(m.tasks.has_value(), m.tasks ? format("%.4f", m.tasks->acc_norm.value) : ""),
                        format("%.1f", m.tokens_per_second())});
    }
    std::vector<size_t> width(head.size(), 0);
    for (const auto& r : rows)
        for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    std::string out;
    for (const auto& r : rows) {
        for (size_t i = 0; i < r.size(); ++i) {
            const std::string pad(width[i] - r[i].size(), ' ');
            out += i == 0 ? r[i] + pad : "  " + pad + r[i];
        }
        out += "\n";
    }
    return out;
}

std::string format_kld_stats(const engine::KldStats& s) {
    std::string out = "====== Perplexity statistics ======\n";
    out += format("Mean PPL(Q)                   : %10.6f ± %10.6f\n", s.ppl.value, s.ppl.stderr_value);
    out += format("Mean PPL(base)                : %10.6f ± %10.6f\n", s.ppl_base.value, s.ppl_base.stderr_value);
    out += format("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * s.ln_ppl_correlation);
    out += format("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", s.ln_ppl_ratio.value, s.ln_ppl_ratio.stderr_value);
    out += format("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", s.ppl_ratio.value, s.ppl_ratio.stderr_value);
    out += format("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", s.ppl_diff.value, s.ppl_diff.stderr_value);
    out += "\n====== KL divergence statistics ======\n";
    out += format("Mean    KLD: %10.6f ± %10.6f\n", s.kld.value, s.kld.stderr_value);
    for (const engine::Quantile& q : s.kld_quantiles)
        out += quantile_label(q.fraction) + format("KLD: %10.6f\n", q.value);
    out += "\n====== Token probability statistics ======\n";
    out += format("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * s.p_diff.value, 100 * s.p_diff.stderr_value);
    for (const engine::Quantile& q : s.p_diff_quantiles)
        out += quantile_label(q.fraction) + format("Δp: %6.3f%%\n", 100 * q.value);
    out += format("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * s.p_diff_rms.value, 100 * s.p_diff_rms.stderr_value);
    out += format("Same top p: %6.3f ± %5.3f %%\n", 100 * s.same_top.value, 100 * s.same_top.stderr_value);
    return out;
}

std::string report_json(const ScoreReport& report) {
    ordered_json j;
    if (report.text_path) j["text"] = {{"path", *report.text_path}, {"n_ctx", report.n_ctx}};
    if (report.tasks_path) j["tasks"] = {{"path", *report.tasks_path}};
    j["base"] = report.models.front().path;
    ordered_json models = ordered_json::array();
    for (const ScoredModel& m : report.models) {
        ordered_json o = {{"path", m.path},
                          {"label", m.label},
                          {"file_size", m.file_size},
                          {"n_params", m.n_params},
                          {"bits_per_weight", m.bits_per_weight}};
        if (m.ppl)
            o["ppl"] = {{"value", m.ppl->ppl},
                        {"stderr", m.ppl->ppl_stderr},
                        {"nll_mean", m.ppl->nll_mean},
                        {"n_chunks", m.ppl->n_chunks},
                        {"n_scored", m.ppl->n_scored}};
        if (m.kld) o["kld_vs_base"] = kld_json(*m.kld);
        if (!m.kld_missing.empty()) o["kld_missing"] = m.kld_missing;
        if (m.tasks)
            o["tasks"] = {{"n", m.tasks->n},
                          {"acc", m.tasks->acc.value},
                          {"acc_stderr", m.tasks->acc.stderr_value},
                          {"acc_norm", m.tasks->acc_norm.value},
                          {"acc_norm_stderr", m.tasks->acc_norm.stderr_value}};
        o["tokens_decoded"] = m.tokens_decoded;
        o["tokens_per_second"] = m.tokens_per_second();
        models.push_back(std::move(o));
    }
    j["models"] = std::move(models);
    return j.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

std::string report_csv(const ScoreReport& report) {
    std::vector<std::string> head = {"model", "path", "file_size", "bits_per_weight", "ppl", "ppl_stderr", "kld_mean",
                                     "kld_stderr"};
    for (const double f : engine::kKldFractions) head.push_back("kld_" + quantile_key(f));
    for (const char* h : {"same_top", "same_top_stderr", "p_diff_mean", "p_diff_rms", "acc", "acc_stderr",
                                 "acc_norm", "acc_norm_stderr", "tokens_per_second"})
        head.push_back(h);
    std::string out;
    for (size_t i = 0; i < head.size(); ++i) out += (i ? "," : "") + head[i];
    out += "\n";
    const auto num = [](double v) { return format("%.9g", v); };
    for (const ScoredModel& m : report.models) {
        std::vector<std::string> r = {csv_field(m.label), csv_field(m.path), std::to_string(m.file_size),
                                      num(m.bits_per_weight)};
        r.push_back(m.ppl ? num(m.ppl->ppl) : "");
        r.push_back(m.ppl ? num(m.ppl->ppl_stderr) : "");
        const engine::KldStats* k = m.kld ? &*m.kld : nullptr;
        r.push_back(k ? num(k->kld.value) : "");
        r.push_back(k ? num(k->kld.stderr_value) : "");
        for (const double f : engine::kKldFractions) r.push_back(k ? num(quantile(k->kld_quantiles, f)) : "");
        r.push_back(k ? num(k->same_top.value) : "");
        r.push_back(k ? num(k->same_top.stderr_value) : "");
        r.push_back(k ? num(k->p_diff.value) : "");
        r.push_back(k ? num(k->p_diff_rms.value) : "");
        const engine::McStats* t = m.tasks ? &*m.tasks : nullptr;
        r.push_back(t ? num(t->acc.value) : "");
        r.push_back(t ? num(t->acc.stderr_value) : "");
        r.push_back(t ? num(t->acc_norm.value) : "");
        r.push_back(t ? num(t->acc_norm.stderr_value) : "");
        r.push_back(num(m.tokens_per_second()));
        for (size_t i = 0; i < r.size(); ++i) out += (i ? "," : "") + r[i];
        out += "\n";
    }
    return out;
}

std::string report_svg(const ScoreReport& report) {
    constexpr double kWidth = 640, kHeight = 420, kLeft = 80, kRight = 30, kTop = 40, kBottom = 60;
    double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
    for (const ScoredModel& m : report.models) {
        if (!m.ppl) throw std::logic_error("report_svg: " + m.label + " has no perplexity");
        const double x = m.file_size / 1048576.0;
        x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
        y_lo = std::min(y_lo, m.ppl->ppl), y_hi = std::max(y_hi, m.ppl->ppl);
    }
    const std::vector<double> xt = ticks(x_lo, x_hi), yt = ticks(y_lo, y_hi);
    const auto px = [&](double x) { return kLeft + (x - xt.front()) / (xt.back() - xt.front()) * (kWidth - kLeft - kRight); };
    const auto py = [&](double y) {
        return kHeight - kBottom - (y - yt.front()) / (yt.back() - yt.front()) * (kHeight - kTop - kBottom);
    };
    std::string out = format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n",
        kWidth, kHeight, kWidth, kHeight);
    out += "<title>" + xml_escape("perplexity against file size" + (report.text_path ? ": " + *report.text_path : "")) +
           "</title>\n";
    out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    out += format("<g class=\"axes\" stroke=\"black\"><line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\"/>", kLeft,
                  kHeight - kBottom, kWidth - kRight, kHeight - kBottom);
    out += format("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\"/></g>\n", kLeft, kTop, kLeft, kHeight - kBottom);
    for (const double t : xt)
        out += format(
            "<g class=\"xtick\"><line x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" stroke=\"black\"/>"
            "<text x=\"%.2f\" y=\"%g\" text-anchor=\"middle\">%g</text></g>\n",
            px(t), kHeight - kBottom, px(t), kHeight - kBottom + 5, px(t), kHeight - kBottom + 20, t);
    for (const double t : yt)
        out += format(
            "<g class=\"ytick\"><line x1=\"%g\" y1=\"%.2f\" x2=\"%g\" y2=\"%.2f\" stroke=\"black\"/>"
            "<text x=\"%g\" y=\"%.2f\" text-anchor=\"end\" dominant-baseline=\"middle\">%g</text></g>\n",
            kLeft - 5, py(t), kLeft, py(t), kLeft - 8, py(t), t);
    out += format("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">file size (MiB)</text>\n",
                  (kLeft + kWidth - kRight) / 2, kHeight - 15);
    out += format("<text x=\"20\" y=\"%g\" text-anchor=\"middle\" transform=\"rotate(-90 20 %g)\">perplexity</text>\n",
                  (kTop + kHeight - kBottom) / 2, (kTop + kHeight - kBottom) / 2);
    for (const ScoredModel& m : report.models) {
        const double x = px(m.file_size / 1048576.0), y = py(m.ppl->ppl);
        out += format("<g class=\"point\"><circle cx=\"%.2f\" cy=\"%.2f\" r=\"4\" fill=\"steelblue\"/>", x, y);
        out += format("<text x=\"%.2f\" y=\"%.2f\">", x + 7, y - 7) + xml_escape(m.label) + "</text></g>\n";
    }
    return out + "</svg>\n";
}

void write_all_or_nothing(const std::vector<std::pair<std::string, std::string>>& files) {
    std::vector<std::string> temps;
    const auto remove_temps = [&] {
        std::error_code ec;
        for (const std::string& t : temps) std::filesystem::remove(t, ec);
    };
    for (const auto& [path, contents] : files)
        if (std::filesystem::is_directory(path)) throw std::runtime_error("cannot write " + path + ": it is a folder");
    for (const auto& [path, contents] : files) {
        temps.push_back(path + ".tmp." + std::to_string(getpid()));
        std::ofstream out(temps.back(), std::ios::binary | std::ios::trunc);
        out << contents;
        out.close();
        if (!out) {
            remove_temps();
            throw std::runtime_error("cannot write " + path);
        }
    }
    for (size_t i = 0; i < files.size(); ++i) {
        std::error_code ec;
        std::filesystem::rename(temps[i], files[i].first, ec);
        if (ec) {
            // The files renamed so far are this run's: without the rest they are half an answer.
            std::error_code ignored;
            for (size_t j = 0; j < i; ++j) std::filesystem::remove(files[j].first, ignored);
            remove_temps();
            throw std::runtime_error("cannot write " + files[i].first + ": " + ec.message());
        }
    }
}

}  // namespace deskside::cli
