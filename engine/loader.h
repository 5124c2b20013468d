// The one loader (DESIGN.md key decision 9): a model file opened and parsed once (models::ModelFile)
// becomes backends opened by name, a placement plan, and a Model that follows the plan. Every front
// end (generate, chat, serve, bench) loads through here, so they place and check alike.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "engine/model.h"
#include "engine/placement.h"
#include "engine/stage_link.h"
#include "models/model.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::engine {

// Which devices a model runs on and how its layers are split across them.
struct DeviceRequest {
    std::vector<std::string> names{"cpu"};  // as backends::list_devices() names them; may repeat
    SplitSpec split;                        // auto: by free memory
    int64_t n_parallel = 1;                 // sequences the fit check reserves context for
    int n_threads = 0;                      // CPU devices: 0 = one per physical core
    bool peer_access = false;               // direct GPU-to-GPU copies (backends::set_peer_access)
    // Mixture-of-experts models: the expert blocks of the first this-many layers stay in host
    // memory and run on the CPU (--cpu-moe: all, kAllExpertLayers; --n-cpu-moe N); 0 = none. A
    // non-zero value for a dense model is an error.
    int64_t cpu_moe_layers = 0;
    // --split-hosts: the layers are split across the ranks of `link` in these ratios (one per
    // rank), and `names` / `split` place this rank's share on its devices. Absent: one process.
    SplitSpec hosts;
    StageLink* link = nullptr;  // must outlive the model
};
constexpr int64_t kAllExpertLayers = INT64_MAX;

// The expert offload `request` asks for on `info` (layers clamped to the model's), with the
// host's free memory. Throws std::invalid_argument when experts are offloaded for a dense model.
ExpertOffload expert_offload(const models::ModelInfo& info, const DeviceRequest& request);

// The requested devices with the free memory backends::list_devices() reports. Throws
// std::invalid_argument for an unknown or unusable name, listing the usable ones.
std::vector<PlanDevice> plan_device_list(std::span<const std::string> names);

struct LoadedModel {
    std::unique_ptr<StageLink> link;  // --split-hosts: declared first, as the model uses it up to its end
    std::unique_ptr<models::Tokenizer> tokenizer;
    std::vector<std::unique_ptr<backends::Backend>> backends;  // one per requested device; the model refers to them
    std::unique_ptr<backends::Backend> expert_host;  // the CPU running offloaded experts, when no "cpu" is in the list
    Plan plan;  // this process's devices (the layers of its rank with --split-hosts)
    std::unique_ptr<Model> model;

    // "cpu" or "vulkan0[0-2],cpu[3-5]": the devices and their layers, for status lines; another
    // host's layers read "rank1[6-11]".
    std::string summary() const;
    // Threads of the first CPU device (0 when none runs on the CPU), for timing lines.
    int cpu_threads() const;
};

// Plans `file` on the requested devices with `options`' cache and batch, checks that the plan fits
// (std::runtime_error with check_plan's advice otherwise), opens the devices and places the model
// by the plan. Throws std::invalid_argument for bad device names or splits (before opening any).
// With request.hosts, only this rank's layers are planned and loaded (the first rank's with the
// embedding, the last's with the output head); the caller makes every rank agree that all loaded.
LoadedModel load_model(models::ModelFile file, const DeviceRequest& devices, const EngineOptions& options);

}  // namespace deskside::engine
