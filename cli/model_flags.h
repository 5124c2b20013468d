// The flags every model-running command shares (-m, sampling, threads, KV cache, devices and
// split) and loading "model + tokenizer + devices" from them, so that generate, chat and friends
// read the same options the same way and print the same --help lines.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "cli/args.h"
#include "engine/loader.h"
#include "engine/model.h"
#include "engine/placement.h"
#include "engine/sampler.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::cli {

// --devices LIST and --split R1,R2|auto.
struct DeviceFlags {
    std::vector<std::string> names{"cpu"};  // as backends::list_devices() names them; may repeat
    engine::SplitSpec split;                // auto when absent
    bool given = false;                     // --devices, --split, --cpu-moe or --quantize was on the command line
    bool peer_access = false;               // --peer-access
    int64_t cpu_moe_layers = 0;             // --cpu-moe (engine::kAllExpertLayers) / --n-cpu-moe N
    // --quantize TYPE: the weights are quantized in memory at load (models/quantize.h), so a
    // Hugging Face checkpoint or an F16 GGUF runs as the quantized file would. Read here, with the
    // placement flags, because every model-running command loads through load_on_devices.
    std::optional<std::string> quantize;
    // --split-hosts R1,R2,...: the layers split across the processes of an MPI job in these
    // ratios, one per rank (cli/split_hosts.h); --devices and --split then place each rank's share.
    engine::SplitSpec hosts;
};

// The --help lines of DeviceFlags, a literal to concatenate into the commands' usage text.
#define DESKSIDE_DEVICE_FLAGS_HELP                                                                   \
    "  --devices LIST           devices to split the model's layers across, e.g. cuda0,cuda1\n"   \
    "                           or vulkan0,cpu (default cpu; a name may repeat: cpu,cpu)\n"         \
    "  --split R1,R2|auto       layers per device in these ratios, or auto: by free memory\n"      \
    "  --peer-access            CUDA GPUs copy to each other directly (off: through host memory;\n" \
    "                           some boards corrupt peer copies)\n"                                 \
    "  --cpu-moe                mixture-of-experts models: keep every layer's experts in host\n"   \
    "                           memory and run them on the CPU (the rest on --devices)\n"          \
    "  --n-cpu-moe N            the same for the experts of the first N layers only\n"           \
    "  --quantize TYPE          quantize the weights at load, as `deskside quantize --type TYPE`\n" \
    "                           would (Q8_0, Q4_K_M, ...); the model must be F32, F16 or BF16\n"   \
    "  --split-hosts R1,R2      split the layers across the processes of an MPI job in these\n"   \
    "                           ratios (mpirun -np 2 --host a,b deskside ... --split-hosts 1,1);\n" \
    "                           rank 0 runs the command, the others only their layers\n"

struct ModelFlags {
    std::string model_path;
    long long threads = 0;  // 0: one per physical core
    std::optional<long long> ctx_size;
    engine::KvCacheConfig cache;  // n_positions is set by load_model_from_flags
    DeviceFlags devices;
};

// Reads --devices, --split, --cpu-moe / --n-cpu-moe and --quantize. Throws UsageError for an
// empty entry or a bad ratio.
DeviceFlags read_device_flags(Args& args);

// The --devices entries with the free memory backends::list_devices() reports. Throws
// UsageError for an unknown or unusable name, listing the usable ones.
std::vector<engine::PlanDevice> plan_device_list(const DeviceFlags& flags);

// `flags`' expert offload on `info` (engine::expert_offload). Throws UsageError for a dense model.
engine::ExpertOffload expert_offload(const models::ModelInfo& info, const DeviceFlags& flags);

// The placement plan of `info` on `devices` with `options`' cache and batch; opens nothing. Fills
// `needs`. Throws UsageError when the model cannot be split that way (more devices than layers).
// With --quantize, the plan of the weights as quantized (quantized here, then dropped).
engine::Plan plan_devices(const models::ModelInfo& info, std::span<const engine::PlanDevice> devices,
                          const DeviceFlags& flags, const engine::EngineOptions& options, engine::MemoryNeeds& needs);

// The flags as the loader's request: --devices, --split, threads, and the sequences to plan for.
engine::DeviceRequest device_request(const DeviceFlags& flags, int64_t n_parallel, int n_threads);

// engine::load_model with UsageError for bad device names and splits (the loader's
// std::invalid_argument) and for --quantize on a model that is already quantized or an unknown
// type; the rest propagates (a plan that does not fit, a file that cannot load). With --split-hosts
// this returns on rank 0 only: the other ranks run their layers for it, then exit. Shows the load's
// progress on stderr (cli/load_bar.h) and also hands each step to `options.progress` when set.
engine::LoadedModel load_on_devices(models::ModelFile file, const DeviceFlags& flags, const engine::EngineOptions& options,
                                    int64_t n_parallel, int n_threads);

// -m / --model: a model path, or a name in the model store (models/store/resolve.h), resolved to
// a path; nullopt when the flag is absent. Throws for an unknown name, listing the store.
std::optional<std::string> model_arg(Args& args);

// Reads -m (required), -t/--threads, -c/--ctx-size, --cache-type-k/v, --devices, --split.
// Throws UsageError.
ModelFlags read_model_flags(Args& args);
// Reads --temp --top-k --top-p --min-p --repeat-penalty --presence-penalty --frequency-penalty
// --seed (random when absent). Throws UsageError.
engine::SamplerParams read_sampling_flags(Args& args);

// A model loaded by load_model_from_flags, with the KV cache capacity it was given.
struct FlagsModel : engine::LoadedModel {
    int64_t n_positions = 0;
};

// Loads the tokenizer and the weights onto the --devices with a KV cache of --ctx-size positions,
// or, when the flag is absent, `default_positions` capped at the model's training context (past
// it the model was never trained to attend). Throws what the loaders throw.
FlagsModel load_model_from_flags(const ModelFlags& flags, int64_t default_positions);

}  // namespace deskside::cli
