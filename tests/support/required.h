// What a test needs beyond the build (a real model file, a tool) and what it
// does without it: WARNs why and skips on a developer's machine, FAILs where
// the run must be complete (CI=true, as CI sets it, or
// DESKSIDE_REQUIRE_MODELS=1), so that a CI run cannot pass by skipping. Devices
// have their own switch (DESKSIDE_REQUIRE_DEVICES,
// tests/backends/op_harness.h).
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace deskside::test {

inline bool models_required() {
  const char *ci = std::getenv("CI");
  const char *require = std::getenv("DESKSIDE_REQUIRE_MODELS");
  return (ci && std::string_view(ci) == "true") ||
         (require && *require && std::string_view(require) != "0");
}

// Whether `path` exists; otherwise skips (false) or fails, naming `what` it was
// needed for and `how` to get it.
inline bool model_or_skip(const std::string &path, const std::string &what,
                          const std::string &how) {
  if (!path.empty() && std::filesystem::exists(path))
    return true;
  if (models_required())
    FAIL(path << " is absent, which " << what << " needs (" << how << ")");
  WARN("SKIPPED: " << path << " is absent, which " << what << " needs (" << how
                   << ")");
  return false;
}

// The real Gemma 3 270M (Q4_K_M) where scripts/fetch-gemma3-270m.sh puts it, or
// $DESKSIDE_GEMMA3_270M.
inline std::string gemma3_270m_path() {
  if (const char *env = std::getenv("DESKSIDE_GEMMA3_270M"); env && *env)
    return env;
  const char *home = std::getenv("HOME");
  return std::string(home ? home : "") +
         "/.cache/deskside/models/gemma-3-270m-q4_k_m.gguf";
}
inline constexpr const char *kFetchGemma =
    "scripts/fetch-gemma3-270m.sh fetches it";

} // namespace deskside::test
