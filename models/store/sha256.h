// SHA-256 (FIPS 180-4), streaming, so a download can be hashed while it is written and a
// resumed download by re-reading the part already on disk.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deskside::models::store {

class Sha256 {
   public:
    Sha256();
    void update(const void* data, size_t n);
    void update(std::string_view s) { update(s.data(), s.size()); }
    // The digest as 64 lowercase hex digits. Call once; the object is spent afterwards.
    std::string hex_digest();

   private:
    void compress(const uint8_t* block);
    std::array<uint32_t, 8> h_;
    std::array<uint8_t, 64> buf_{};
    size_t buf_len_ = 0;
    uint64_t total_bytes_ = 0;
};

// The sha256 of a whole file, read in 1 MiB pieces. Throws std::runtime_error naming the file.
std::string sha256_file(const std::string& path);

// Whether `s` is 64 hex digits (either case).
bool is_sha256_hex(std::string_view s);

}  // namespace deskside::models::store
