// Download progress on stderr: a redrawn bar (bytes, rate, ETA) when stderr is a terminal, else a
// plain line every 10% (or every 64 MiB when the size is unknown), so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace deskside::models::store {

class Progress {
   public:
    // `label` names what is transferred; `start` bytes are already on disk (a resumed download).
    Progress(std::string label, uint64_t start, std::optional<uint64_t> total);
    void update(uint64_t done);
    // The size once known exactly (a download announced with a rounded size).
    void set_total(uint64_t total) { total_ = total; }
    void finish(uint64_t done);

   private:
    void draw(uint64_t done, bool final);
    std::string label_;
    uint64_t start_;
    std::optional<uint64_t> total_;
    bool tty_;
    std::chrono::steady_clock::time_point began_, last_draw_;
    uint64_t next_plain_mark_ = 0;
};

// "12.3 MiB" style.
std::string human_bytes(double bytes);

}  // namespace deskside::models::store
