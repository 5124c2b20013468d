#include "backends/devices.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_features.h"

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

}  // namespace

std::vector<DeviceInfo> list_devices() { return {cpu_device()}; }

std::unique_ptr<Backend> open_device(const std::string& name, int n_threads) {
    if (name == "cpu") return std::make_unique<cpu::CpuBackend>(n_threads);
    std::string names;
    for (const DeviceInfo& d : list_devices()) {
        if (!d.usable) continue;
        names += (names.empty() ? "" : ", ") + d.name;
    }
    throw std::invalid_argument("unknown device '" + name + "' (available: " + names + ")");
}

}  // namespace deskside::backends
