#include "backends/devices.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dot_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cuda/cuda_registry.h"
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
    if (f.has_amx_int8()) d.features.push_back("amx-int8");
    if (f.has_amx_bf16()) d.features.push_back("amx-bf16");
    // Advertised but refused by the kernel: shown, so that `deskside env` explains a missing AMX.
    if (f.amx_tile && !f.amx_permitted) d.features.push_back("amx-not-permitted");
    return d;
}

std::vector<DeviceInfo> list_cpu(std::string*) {
    return {cpu_device()};
}

std::unique_ptr<Backend> open_cpu(const std::string& name, int n_threads) {
    if (name != "cpu") return nullptr;
    return std::make_unique<cpu::CpuBackend>(n_threads);
}

std::unique_ptr<Backend> open_vulkan(const std::string& name, int) {
    return vulkan::open_vulkan_device(name);
}
std::unique_ptr<Backend> open_cuda(const std::string& name, int) {
    return cuda::open_cuda_device(name);
}
int no_split() {
    return 1;
}

// One row per device API. A new backend adds its row here (DESIGN.md key decision 2).
struct DeviceApiRow {
    const char* api;
    std::vector<DeviceInfo> (*list)(std::string* why_absent);
    std::unique_ptr<Backend> (*open)(const std::string& name, int n_threads);  // nullptr: not this API's name
    int (*split)();
};

constexpr DeviceApiRow kDeviceApis[] = {
    {"cpu", &list_cpu, &open_cpu, &no_split},
    {"vulkan", &vulkan::list_vulkan_devices, &open_vulkan, &vulkan::vulkan_split},
    {"cuda", &cuda::list_cuda_devices, &open_cuda, &cuda::cuda_split},
};

}  // namespace

std::vector<DeviceInfo> list_devices(std::vector<AbsentApi>* absent) {
    std::vector<DeviceInfo> out;
    for (const DeviceApiRow& row : kDeviceApis) {
        std::string why;
        std::vector<DeviceInfo> found = row.list(&why);
        if (found.empty() && absent) absent->push_back({row.api, why});
        for (DeviceInfo& d : found) out.push_back(std::move(d));
    }
    return out;
}

int split_from_env(const char* variable) {
    const char* env = std::getenv(variable);
    if (!env || !*env) return 1;
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > 16)
        throw std::invalid_argument(std::string(variable) + "='" + env + "': expected an integer from 1 to 16");
    return static_cast<int>(n);
}

int device_split(const std::string& api) {
    for (const DeviceApiRow& row : kDeviceApis)
        if (api == row.api) return row.split();
    throw std::invalid_argument("unknown device API '" + api + "'");
}

std::vector<std::string> device_apis() {
    std::vector<std::string> out;
    for (const DeviceApiRow& row : kDeviceApis) out.push_back(row.api);
    return out;
}

std::string cpu_isa_level() {
    return std::string(cpu::isa_name(cpu::selected_isa()));
}
std::string cpu_isa_best() {
    return std::string(cpu::isa_name(cpu::detected_isa()));
}
int default_cpu_threads() {
    return cpu::physical_cores();
}

void set_peer_access(bool on) {
    cuda::set_cuda_peer_access(on);
}

std::unique_ptr<Backend> open_device(const std::string& name, int n_threads) {
    for (const DeviceApiRow& row : kDeviceApis)
        if (std::unique_ptr<Backend> b = row.open(name, n_threads)) return b;
    const std::vector<DeviceInfo> devices = list_devices();
    for (const DeviceInfo& d : devices)
        if (d.name == name && !d.usable) throw std::invalid_argument("device '" + name + "' cannot be used: " + d.note);
    std::string names;
    for (const DeviceInfo& d : devices) {
        if (!d.usable) continue;
        names += (names.empty() ? "" : ", ") + d.name;
    }
    throw std::invalid_argument("unknown device '" + name + "' (available: " + names + ")");
}

}  // namespace deskside::backends
