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
    // The software under the device and what the kernels chose on it, for `deskside env` (empty
    // where an API has no such thing, e.g. every field for the CPU).
    std::string driver;           // Vulkan: driverName and driverInfo ("llvmpipe: Mesa 22.3.6 (LLVM 15.0.6)")
    std::string driver_version;   // Vulkan: driverVersion as its vendor encodes it; CUDA: the driver's CUDA version
    std::string runtime_version;  // CUDA: the runtime this build links; Vulkan: the loader's instance version
    std::string api_version;      // Vulkan: the device's apiVersion ("1.3.230")
    // The kernel variants the backend runs on this device, each of which can change results:
    // Vulkan "exact" or "plain", "int8-dot", "storage16", "subgroup-arith", "subgroup=32".
    std::vector<std::string> kernels;
};

}  // namespace deskside::backends
