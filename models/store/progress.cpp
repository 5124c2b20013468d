#include "models/store/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace deskside::models::store {

namespace {

constexpr uint64_t kPlainStepUnknown = 64ull << 20;
constexpr int kBarWidth = 30;

std::string clock_text(double seconds) {
    const long s = static_cast<long>(seconds + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    return buf;
}

}  // namespace

std::string human_bytes(double bytes) {
    static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, kUnits[u]);
    return buf;
}

Progress::Progress(std::string label, uint64_t start, std::optional<uint64_t> total)
    : label_(std::move(label)), start_(start), total_(total), tty_(isatty(STDERR_FILENO) == 1),
      began_(std::chrono::steady_clock::now()), last_draw_(began_) {
    next_plain_mark_ = start;
}

void Progress::update(uint64_t done) {
    const auto now = std::chrono::steady_clock::now();
    if (tty_) {
        if (now - last_draw_ < std::chrono::milliseconds(100)) return;
        last_draw_ = now;
        draw(done, false);
    } else if (done >= next_plain_mark_ && !(total_ && done >= *total_)) {  // finish() prints the last line
        draw(done, false);
        const uint64_t step = total_ && *total_ > 0 ? std::max<uint64_t>(*total_ / 10, 1) : kPlainStepUnknown;
        next_plain_mark_ = (done / step + 1) * step;
    }
}

void Progress::finish(uint64_t done) { draw(done, true); }

void Progress::draw(uint64_t done, bool final) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
    const double rate = secs > 0 ? double(done - std::min(done, start_)) / secs : 0;
    std::string line = label_ + " " + human_bytes(double(done));
    if (total_) {
        const double frac = *total_ ? std::min(1.0, double(done) / double(*total_)) : 1.0;
        if (tty_) {
            const int filled = static_cast<int>(frac * kBarWidth);
            line = label_ + " [" + std::string(filled, '=') + std::string(kBarWidth - filled, ' ') + "] " + human_bytes(double(done));
        }
        char pct[16];
        std::snprintf(pct, sizeof pct, " (%.0f%%)", frac * 100);
        line += " / " + human_bytes(double(*total_)) + pct;
    }
    line += "  " + human_bytes(rate) + "/s";
    if (total_ && rate > 0 && !final) line += "  ETA " + clock_text(double(*total_ - std::min(*total_, done)) / rate);
    if (final) line += "  done in " + clock_text(secs);
    if (tty_) {
        std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
    } else {
        std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
}

}  // namespace deskside::models::store
