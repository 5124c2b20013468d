// deskside devices [--json]: every compute device this build can use (backends/devices.h), with
// memory and the features the kernels care about.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "backends/devices.h"
#include "cli/commands.h"

namespace deskside::cli {
namespace {

std::string gib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
    return buf;
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& s : items) out += (out.empty() ? "" : " ") + s;
    return out;
}

int run(Args& args) {
    const bool json = args.flag("--json");
    args.finish();
    std::vector<backends::AbsentApi> absent;
    const std::vector<backends::DeviceInfo> devices = backends::list_devices(&absent);

    if (json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& d : devices) {
            list.push_back({{"name", d.name}, {"api", d.api}, {"description", d.description}, {"type", d.type},
                            {"total_memory", d.total_memory}, {"free_memory", d.free_memory}, {"usable", d.usable},
                            {"note", d.note}, {"features", d.features}});
        }
        nlohmann::json out{{"devices", list}};
        for (const std::string& api : backends::device_apis()) {
            if (api != "cpu") out[api + "_split"] = backends::device_split(api);
        }
        for (const backends::AbsentApi& a : absent) out["no_" + a.api + "_reason"] = a.why;
        std::printf("%s\n", out.dump(2).c_str());
        return 0;
    }
    std::printf("%-9s %-7s %-15s %10s %10s  %s\n", "NAME", "API", "TYPE", "MEMORY", "FREE", "DESCRIPTION");
    for (const auto& d : devices) {
        std::printf("%-9s %-7s %-15s %10s %10s  %s%s\n", d.name.c_str(), d.api.c_str(), d.type.c_str(),
                    gib(d.total_memory).c_str(), gib(d.free_memory).c_str(), d.description.c_str(),
                    d.usable ? "" : "  (not usable)");
        if (!d.features.empty()) std::printf("          features: %s\n", join(d.features).c_str());
        if (!d.note.empty()) std::printf("          note: %s\n", d.note.c_str());
    }
    for (const backends::AbsentApi& a : absent) std::printf("no %s device: %s\n", a.api.c_str(), a.why.c_str());
    return 0;
}

}  // namespace

const Command kDevicesCommand{
    "devices",
    "list the compute devices (CPU, Vulkan, CUDA) with memory and features",
    "usage: deskside devices [--json]\n"
    "\n"
    "Lists every device that --devices accepts: cpu, vulkanN, cudaN, and for an API with no device,\n"
    "why (no driver, not built in). FREE comes from VK_EXT_memory_budget when the driver has it (else\n"
    "the heap size), from cudaMemGetInfo for CUDA, and from MemAvailable for the CPU.\n"
    "  --json   the same as a JSON object {\"devices\": [...]} (plus \"no_API_reason\" per absent API\n"
    "           and \"API_split\")\n"
    "\n"
    "Environment:\n"
    "  DESKSIDE_VULKAN_SPLIT=N   expose each Vulkan device as N logical devices with separate\n"
    "                            allocations and 1/N of its memory (to test layer splits on one GPU)\n"
    "  DESKSIDE_CUDA_SPLIT=N     the same for each CUDA device\n",
    &run,
};

}  // namespace deskside::cli
