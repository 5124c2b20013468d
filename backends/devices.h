// The device registry: every compute device this build can use, by the names users type
// (`--devices vulkan0,cpu`, `deskside devices`).
//
// Names: "cpu" (the host), "vulkanN" (N-th Vulkan physical device, or N-th logical device when
// DESKSIDE_VULKAN_SPLIT exposes one physical device as several), "cudaN" (likewise, with
// DESKSIDE_CUDA_SPLIT). Each device API is one row of a table in devices.cpp ({api, list, open,
// split}); an API whose library or driver is absent lists no devices and says why.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/device_info.h"

namespace deskside::backends {

// An API that lists no device, and why ("no Vulkan device found: ...", "deskside was built
// without CUDA", "CUDA: no driver: ...").
struct AbsentApi {
    std::string api;
    std::string why;
};

// Every device, the CPU first, then each API's devices in table order. Never throws for a missing
// driver: such APIs are just absent, and reported in `absent` when it is given.
std::vector<DeviceInfo> list_devices(std::vector<AbsentApi>* absent = nullptr);

// Logical devices per physical device for `api` (DESKSIDE_VULKAN_SPLIT, DESKSIDE_CUDA_SPLIT; 1
// for cpu). Throws std::invalid_argument when the variable is malformed.
int device_split(const std::string& api);

// The value of `variable` (DESKSIDE_VULKAN_SPLIT, DESKSIDE_CUDA_SPLIT): 1 when unset; throws
// std::invalid_argument naming the variable when it is not an integer in 1..16.
int split_from_env(const char* variable);

// The APIs in the registry table, in order ("cpu", "vulkan", "cuda").
std::vector<std::string> device_apis();

// The CPU kernels' instruction-set level, "scalar", "avx2" or "avx512": the one DESKSIDE_CPU_ISA
// names when set, else the best this CPU supports (backends/cpu/dot_kernels.h). Throws
// std::runtime_error for a DESKSIDE_CPU_ISA value the CPU cannot honour.
std::string cpu_isa_level();
// The best level this CPU and its OS support, whatever DESKSIDE_CPU_ISA says.
std::string cpu_isa_best();
// The CPU backend's thread count when none is asked for: one per physical core.
int default_cpu_threads();

// Direct device-to-device copies where the API offers them (CUDA peer access, `--peer-access`);
// off by default: copies between devices then go through host memory.
void set_peer_access(bool on);

// Opens a device by name. n_threads applies to "cpu". Throws std::invalid_argument naming the
// device and listing the available names when it is unknown or unusable.
std::unique_ptr<Backend> open_device(const std::string& name, int n_threads = 0);

}  // namespace deskside::backends
