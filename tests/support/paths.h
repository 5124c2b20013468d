// Where tests find the shared model files and the built CLI (set by tests/CMakeLists.txt). The
// environment may move them, for a test binary run on another machine (scripts/gpu-check.sh runs
// a bundle there): DESKSIDE_SHARED_DIR (the shared/ folder), DESKSIDE_SOURCE_DIR (the checkout),
// DESKSIDE_TEST_BINARY (the deskside CLI).
#pragma once

#include <cstdlib>
#include <string>

namespace deskside::test {

inline std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}
inline std::string shared_path(const std::string& rel) { return env_or("DESKSIDE_SHARED_DIR", DESKSIDE_SHARED_DIR) + "/" + rel; }
inline std::string source_path(const std::string& rel) { return env_or("DESKSIDE_SOURCE_DIR", DESKSIDE_SOURCE_DIR) + "/" + rel; }
inline std::string deskside_binary() { return env_or("DESKSIDE_TEST_BINARY", DESKSIDE_BINARY); }

}  // namespace deskside::test
