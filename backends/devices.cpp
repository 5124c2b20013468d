#include "backends/devices.h"

#include <dlfcn.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/vulkan/vk_registry.h"

namespace deskside::backends {
namespace {

// A field of /proc/meminfo in bytes (0 when absent).
uint64_t meminfo_bytes(const std::string& field) {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(field + ":", 0) != 0) continue;
        std::istringstream fields(line.substr(field.size() + 1));
        uint64_t kib = 0;
        fields >> kib;
        return kib * 1024;
    }
    return 0;
}

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) != 0) continue;
        const size_t colon = line.find(':');
        if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
    return "host CPU";
}

DeviceInfo cpu_device() {
    DeviceInfo d;
    d.name = "cpu";
    d.api = "cpu";
    d.type = "cpu";
    d.description = cpu_model_name();
    d.total_memory = meminfo_bytes("MemTotal");
    d.free_memory = meminfo_bytes("MemAvailable");
    const cpu::CpuFeatures& f = cpu::cpu_features();
    if (f.has_avx2_kernels()) d.features.push_back("avx2");
    if (f.has_avx512_kernels()) d.features.push_back("avx512-vnni");
    if (f.avx512bf16) d.features.push_back("avx512-bf16");
    return d;
}

// CUDA devices through the driver API, loaded at run time so that the build needs no CUDA
// toolkit. They are listed for information: this build has no CUDA backend.
// ref: CUDA Driver API (cuInit, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceTotalMem_v2).
std::vector<DeviceInfo> cuda_devices() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return {};
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int*);
    using GetFn = int (*)(int*, int);
    using NameFn = int (*)(char*, int, int);
    using MemFn = int (*)(size_t*, int);
    const auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    const auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
    const auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
    const auto get_name = reinterpret_cast<NameFn>(dlsym(lib, "cuDeviceGetName"));
    const auto total_mem = reinterpret_cast<MemFn>(dlsym(lib, "cuDeviceTotalMem_v2"));
    std::vector<DeviceInfo> out;
    int n = 0;
    if (init && count && get && get_name && total_mem && init(0) == 0 && count(&n) == 0) {
        for (int i = 0; i < n; ++i) {
            int dev = 0;
            char name[256] = {};
            size_t bytes = 0;
            if (get(&dev, i) != 0 || get_name(name, sizeof(name) - 1, dev) != 0) continue;
            total_mem(&bytes, dev);
            DeviceInfo d;
            d.name = "cuda" + std::to_string(i);
            d.api = "cuda";
            d.type = "discrete-gpu";
            d.description = name;
            d.total_memory = bytes;
            d.usable = false;
            d.note = "no CUDA backend in this build";
            out.push_back(std::move(d));
        }
    }
    // The driver stays loaded: unloading libcuda after cuInit is not supported.
    return out;
}

}  // namespace

std::vector<DeviceInfo> list_devices() {
    std::vector<DeviceInfo> out{cpu_device()};
    for (DeviceInfo& d : vulkan::list_vulkan_devices()) out.push_back(std::move(d));
    for (DeviceInfo& d : cuda_devices()) out.push_back(std::move(d));
    return out;
}

std::unique_ptr<Backend> open_device(const std::string& name, int n_threads) {
    if (name == "cpu") return std::make_unique<cpu::CpuBackend>(n_threads);
    if (std::unique_ptr<Backend> vk = vulkan::open_vulkan_device(name)) return vk;
    for (const DeviceInfo& d : list_devices())
        if (d.name == name && !d.usable) throw std::invalid_argument("device '" + name + "' cannot be used: " + d.note);
    std::string names;
    for (const DeviceInfo& d : list_devices()) {
        if (!d.usable) continue;
        names += (names.empty() ? "" : ", ") + d.name;
    }
    throw std::invalid_argument("unknown device '" + name + "' (available: " + names + ")");
}

}  // namespace deskside::backends
