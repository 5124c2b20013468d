// The registry's Vulkan part in a build without the Vulkan backend (DESKSIDE_VULKAN=OFF).
#include "backends/vulkan/vk_registry.h"

namespace deskside::backends::vulkan {

std::vector<DeviceInfo> list_vulkan_devices(std::string* why_none) {
    if (why_none) *why_none = "this build has no Vulkan backend (configured with DESKSIDE_VULKAN=OFF)";
    return {};
}

std::unique_ptr<Backend> open_vulkan_device(const std::string&) { return nullptr; }

int vulkan_split() { return 1; }

}  // namespace deskside::backends::vulkan
