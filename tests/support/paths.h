// Where tests find the shared model files and the built CLI (set by tests/CMakeLists.txt).
#pragma once

#include <string>

namespace deskside::test {

inline std::string shared_path(const std::string& rel) { return std::string(DESKSIDE_SHARED_DIR) + "/" + rel; }
inline std::string source_path(const std::string& rel) { return std::string(DESKSIDE_SOURCE_DIR) + "/" + rel; }
inline std::string deskside_binary() { return DESKSIDE_BINARY; }

}  // namespace deskside::test
