// The flags every model-running command shares (-m, sampling, threads, KV cache) and loading
// "model + tokenizer + CPU backend" from them, so that generate, chat and friends read the same
// options the same way and print the same --help lines.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "cli/args.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::cli {

struct ModelFlags {
    std::string model_path;
    long long threads = 0;  // 0: one per physical core
    std::optional<long long> ctx_size;
    engine::KvCacheConfig cache;  // n_positions is set by load_model_from_flags
};

// -m / --model: a model path, or a name in the model store (models/store/resolve.h), resolved to
// a path; nullopt when the flag is absent. Throws for an unknown name, listing the store.
std::optional<std::string> model_arg(Args& args);

// Reads -m (required), -t/--threads, -c/--ctx-size, --cache-type-k/v. Throws UsageError.
ModelFlags read_model_flags(Args& args);
// Reads --temp --top-k --top-p --min-p --repeat-penalty --presence-penalty --frequency-penalty
// --seed (random when absent). Throws UsageError.
engine::SamplerParams read_sampling_flags(Args& args);

struct LoadedModel {
    std::unique_ptr<models::Tokenizer> tokenizer;
    std::unique_ptr<backends::cpu::CpuBackend> backend;  // the model refers to it: declared first
    std::unique_ptr<engine::Model> model;
    int64_t n_positions = 0;  // KV cache capacity
};

// Loads the tokenizer and the weights onto a CPU backend with a KV cache of --ctx-size positions,
// or, when the flag is absent, `default_positions` capped at the model's training context (past
// it the model was never trained to attend). Throws what the loaders throw.
LoadedModel load_model_from_flags(const ModelFlags& flags, int64_t default_positions);

}  // namespace deskside::cli
