// The device registry: every compute device this build can use, by the names users type
// (`--devices vulkan0,cpu`, `deskside devices`).
//
// Names: "cpu" (the host), "vulkanN" (N-th Vulkan physical device, or N-th logical device when
// DESKSIDE_VULKAN_SPLIT exposes one physical device as several), "cudaN" (listed when a CUDA
// driver is present; no CUDA backend is built yet, so open_device refuses it with that reason).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace deskside::backends {

struct DeviceInfo {
    std::string name;         // "cpu", "vulkan0", "cuda0"
    std::string api;          // "cpu", "vulkan", "cuda"
    std::string description;  // e.g. "llvmpipe (LLVM 15.0.6, 256 bits)", "AMD EPYC 7B13"
    std::string type;         // "cpu", "discrete-gpu", "integrated-gpu", "virtual-gpu", "software"
    uint64_t total_memory = 0;  // bytes the device can hold (device-local heap; host RAM for cpu)
    uint64_t free_memory = 0;   // bytes free now (VK_EXT_memory_budget when present; MemAvailable)
    bool usable = true;         // false: listed for information, open_device refuses it
    std::string note;           // why it is unusable, or notable limits
    std::vector<std::string> features;  // e.g. "fp16", "int8-dot", "subgroup=32", "avx2"
};

// Every device, the CPU first. Never throws for a missing driver: such APIs are just absent.
std::vector<DeviceInfo> list_devices();

// Opens a device by name. n_threads applies to "cpu". Throws std::invalid_argument naming the
// device and listing the available names when it is unknown or unusable.
std::unique_ptr<Backend> open_device(const std::string& name, int n_threads = 0);

}  // namespace deskside::backends
