#include "cli/load_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "models/store/progress.h"

namespace deskside::cli {

namespace {

constexpr int kBarWidth = 20;
constexpr auto kRedraw = std::chrono::milliseconds(100);

// "118/226 MiB": both counts in the unit that suits the total.
std::string bytes_of(uint64_t done, uint64_t total) {
    const char* unit = "KiB";
    double scale = 1024.0;
    if (total >= (1ull << 30)) {
        unit = "GiB";
        scale = 1024.0 * 1024 * 1024;
    } else if (total >= (1ull << 20)) {
        unit = "MiB";
        scale = 1024.0 * 1024;
    }
    char buf[64];
    const char* format = scale > 1024.0 * 1024 ? "%.1f/%.1f %s" : "%.0f/%.0f %s";
    std::snprintf(buf, sizeof buf, format, double(done) / scale, double(total) / scale, unit);
    return buf;
}

int test_delay_ms() {
    const char* env = std::getenv("DESKSIDE_TEST_LOAD_DELAY_MS");
    return env ? std::clamp(std::atoi(env), 0, 10000) : 0;
}

}  // namespace

LoadBar::LoadBar(std::string model)
    : model_(std::move(model)), tty_(isatty(STDERR_FILENO) == 1), delay_ms_(test_delay_ms()) {}

LoadBar::~LoadBar() {
    if (line_open_) std::fputc('\n', stderr);
}

void LoadBar::step(const engine::LoadStep& s) {
    const auto now = std::chrono::steady_clock::now();
    if (s.device_index != device_) {
        if (line_open_) std::fputc('\n', stderr);
        line_open_ = false;
        device_ = s.device_index;
        device_done_ = false;
        device_start_ = now;
        if (!tty_)
            std::fprintf(stderr, "loading %s: %s: %s %s\n", model_.c_str(), s.device.c_str(), s.action,
                         models::store::human_bytes(double(s.device_total)).c_str());
    }
    const bool final = s.device_done >= s.device_total;
    if (final && !device_done_) {
        device_done_ = true;
        draw(s, true);
    } else if (!final && tty_ && (!line_open_ || now - last_draw_ >= kRedraw)) {
        draw(s, false);
    }
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
}

void LoadBar::draw(const engine::LoadStep& s, bool final) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - device_start_).count();
    last_draw_ = std::chrono::steady_clock::now();
    if (!tty_) {
        std::fprintf(stderr, "loading %s: %s: done in %.1f s\n", model_.c_str(), s.device.c_str(), secs);
        return;
    }
    const double frac = s.device_total ? double(s.device_done) / double(s.device_total) : 1.0;
    const int filled = static_cast<int>(frac * kBarWidth);
    std::string line = "loading " + model_ + "... " + s.device + ": " + s.action + "  [" + std::string(filled, '#') +
                       std::string(kBarWidth - filled, ' ') + "] ";
    char tail[96];
    std::snprintf(tail, sizeof tail, "%3.0f%%  %s", frac * 100, bytes_of(s.device_done, s.device_total).c_str());
    line += tail;
    if (final) {
        char took[32];
        std::snprintf(took, sizeof took, "  %.1f s", secs);
        line += took;
    }
    std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
    std::fflush(stderr);
    line_open_ = !final;
}

}  // namespace deskside::cli
