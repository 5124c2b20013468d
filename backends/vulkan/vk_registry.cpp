#include "backends/vulkan/vk_registry.h"

#include <cstdlib>
#include <stdexcept>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_device.h"

namespace deskside::backends::vulkan {
namespace {

const char* type_name(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete-gpu";
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated-gpu";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual-gpu";
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return "software";
        default: return "other";
    }
}

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + "MiB"; }

std::string api_version_text(uint32_t v) {
    return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
           std::to_string(VK_API_VERSION_PATCH(v));
}

// driverVersion is vendor-defined: NVIDIA packs 10.8.8.6 bits, Mesa and most others use the
// VK_MAKE_API_VERSION layout. ref: the vendor table in gpuinfo.org's and vulkaninfo's decoders
std::string driver_version_text(uint32_t vendor_id, uint32_t v) {
    constexpr uint32_t kNvidia = 0x10DE;
    if (vendor_id == kNvidia)
        return std::to_string(v >> 22) + "." + std::to_string((v >> 14) & 0xFF) + "." +
               std::to_string((v >> 6) & 0xFF) + "." + std::to_string(v & 0x3F);
    return api_version_text(v);
}

// The kernel variants vk_*.cpp pick from these capabilities (the "_exact" shaders, the int8 dot
// products, 16-bit loads, subgroup reductions): what decides a Vulkan device's bits.
std::vector<std::string> kernel_variants(const DeviceCaps& c) {
    std::vector<std::string> out{c.fp64 ? "exact" : "plain"};
    if (c.int8_dot) out.push_back("int8-dot");
    if (c.storage16) out.push_back("storage16");
    if (c.subgroup_arithmetic) out.push_back("subgroup-arith");
    out.push_back("subgroup=" + std::to_string(c.subgroup_size));
    return out;
}

std::string loader_version() {
    uint32_t v = 0;
    return vkEnumerateInstanceVersion(&v) == VK_SUCCESS ? api_version_text(v) : "";
}

// "vulkanN" -> N, or -1.
int parse_index(const std::string& name) {
    constexpr std::string_view kPrefix = "vulkan";
    if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
    int n = 0;
    for (size_t i = kPrefix.size(); i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9' || n > 1000) return -1;
        n = n * 10 + (name[i] - '0');
    }
    return n;
}

}  // namespace

int vulkan_split() { return split_from_env("DESKSIDE_VULKAN_SPLIT"); }

std::vector<DeviceInfo> list_vulkan_devices(std::string* why_none) {
    std::string why;
    VkInstance instance = shared_instance(&why);
    std::vector<DeviceInfo> out;
    if (!instance) {
        if (why_none) *why_none = "no Vulkan loader/instance: " + why;
        return out;
    }
    int split = 1;
    try {
        split = vulkan_split();
    } catch (const std::invalid_argument& e) {
        if (why_none) *why_none = e.what();
        return out;
    }
    const std::vector<VkPhysicalDevice> physical = compute_devices();
    for (size_t p = 0; p < physical.size(); ++p) {
        const DeviceCaps c = query_caps(physical[p]);
        for (int s = 0; s < split; ++s) {
            DeviceInfo d;
            d.name = "vulkan" + std::to_string(p * split + s);
            d.api = "vulkan";
            d.description = c.name;
            d.type = type_name(c.type);
            d.total_memory = c.device_local_bytes / split;
            d.free_memory = (c.has_memory_budget ? c.budget_free_bytes : c.device_local_bytes) / split;
            if (c.fp16) d.features.push_back("fp16");
            if (c.fp64) d.features.push_back("fp64");
            if (c.storage16) d.features.push_back("storage16");
            if (c.int8) d.features.push_back("int8");
            if (c.int8_dot) d.features.push_back("int8-dot");
            if (c.subgroup_arithmetic) d.features.push_back("subgroup-arith");
            d.features.push_back("subgroup=" + std::to_string(c.subgroup_size));
            d.features.push_back("max-binding=" + mib(c.max_storage_buffer_range));
            d.features.push_back("shared=" + std::to_string(c.max_shared_memory / 1024) + "KiB");
            d.driver = c.driver_name + (c.driver_info.empty() ? "" : ": " + c.driver_info);
            d.driver_version = driver_version_text(c.vendor_id, c.driver_version);
            d.runtime_version = loader_version();
            d.api_version = api_version_text(c.api_version);
            d.kernels = kernel_variants(c);
            if (split > 1)
                d.note = "logical device " + std::to_string(s + 1) + " of " + std::to_string(split) +
                         " on one physical device (DESKSIDE_VULKAN_SPLIT)";
            if (!c.has_memory_budget) d.note += std::string(d.note.empty() ? "" : "; ") + "free memory unknown (no VK_EXT_memory_budget)";
            out.push_back(std::move(d));
        }
    }
    if (out.empty() && why_none) *why_none = "the Vulkan loader found no device with a compute queue and Vulkan 1.2";
    return out;
}

std::unique_ptr<Backend> open_vulkan_device(const std::string& name) {
    const int index = parse_index(name);
    if (index < 0) return nullptr;
    const int split = vulkan_split();
    const std::vector<VkPhysicalDevice> physical = compute_devices();
    const size_t p = static_cast<size_t>(index / split);
    if (p >= physical.size()) return nullptr;
    const uint64_t total = query_caps(physical[p]).device_local_bytes;
    return std::make_unique<VulkanBackend>(physical[p], name, split > 1 ? total / split : 0);
}

}  // namespace deskside::backends::vulkan
