// What `deskside devices` shows of one compute device, and what placement reads (memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace deskside::backends
