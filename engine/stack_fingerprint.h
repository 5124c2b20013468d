// The stack fingerprint (`deskside env`, GET /v1/deskside/env, /metrics' deskside_build_info):
// everything that decides a run's results and speed, as one JSON object, so a desk and a cluster
// can be compared field by field (engine/stack_compare.h; DESIGN.md key decision 10).
//
// The object, with keys that engine/stack_compare.cpp classifies:
//   schema                       1
//   deskside {version, commit, dirty, build_type, options {vulkan, cuda, native, sanitize,
//             cuda_architectures}}
//   compiler {cxx, cuda}
//   os       {name, kernel, arch, glibc}
//   isa      the CPU kernels' level ("scalar", "avx2", "avx512"; DESKSIDE_CPU_ISA when set)
//   threads  the CPU backend's thread count
//   cpu      {model, isa_best, features, cores, memory_bytes, max_mhz (null when unknown)}
//   devices  [{name, api, description, type, memory_bytes, usable, driver, driver_version,
//             runtime_version, api_version, kernels, features}]: the GPUs (backends/device_info.h)
//   absent   {API: why it has no device}
//   model    {path, sha256, size_bytes, quant_types [{type, tensors, bytes}]}  (only when asked)
// Free memory is left out on purpose: it changes from one second to the next, a fingerprint must not.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace deskside::engine {

struct FingerprintOptions {
    int n_threads = 0;       // the CPU thread count in use; 0: the CPU backend's default
    std::string model_path;  // a GGUF file or checkpoint directory to digest; empty: no "model"
};

// Gathers the fingerprint of this process's stack. Never fails for a missing GPU or driver (those
// land in "absent"); throws for a DESKSIDE_CPU_ISA the CPU cannot honour and for an unreadable model.
nlohmann::ordered_json stack_fingerprint(const FingerprintOptions& options);

// The "model" part alone: the file's sha256 (a checkpoint directory's: the sha256 of its files'
// `sha256sum` listing, sorted by path), its size and its tensors by storage type. Reads the whole
// model once (seconds per GB).
nlohmann::ordered_json model_fingerprint(const std::string& path);

}  // namespace deskside::engine
