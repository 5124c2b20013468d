// Feedback while a model loads, on stderr: on a terminal a bar per device, redrawn in place
// ("loading qwen... cpu: repacking  [#####     ] 52%  118/226 MiB"); otherwise (a log, a test's
// pipe) two plain lines per device, when it starts and when it is done, so logs stay short.
#pragma once

#include <chrono>
#include <string>

#include "engine/load_progress.h"

namespace deskside::cli {

class LoadBar {
   public:
    // `model` names what loads in every line (the file name without .gguf).
    explicit LoadBar(std::string model);
    // Ends a bar left open (the load threw) so that the error starts on a line of its own.
    ~LoadBar();
    LoadBar(const LoadBar&) = delete;
    LoadBar& operator=(const LoadBar&) = delete;

    // Draws one step of engine::LoadProgress. A test hook lives here, read once by the
    // constructor: DESKSIDE_TEST_LOAD_DELAY_MS=N sleeps N ms after each step, so that tests can
    // watch a tiny model load slowly (serve's /health progress); never set it otherwise.
    void step(const engine::LoadStep& s);

   private:
    void draw(const engine::LoadStep& s, bool final);

    std::string model_;
    bool tty_;
    int delay_ms_ = 0;
    int device_ = -1;        // the device whose line is open
    bool line_open_ = false;  // a terminal bar without its newline yet
    bool device_done_ = false;
    std::chrono::steady_clock::time_point device_start_, last_draw_;
};

}  // namespace deskside::cli
