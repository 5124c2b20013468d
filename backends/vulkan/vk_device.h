// Vulkan instance, physical-device capabilities and the logical device (one compute queue).
//
// One VkInstance serves the process (created on first use). Each VulkanBackend owns its own
// VkDevice, so two backends on one physical device (DESKSIDE_VULKAN_SPLIT) have separate
// allocations and queues, like two cards would.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <vector>

namespace deskside::backends::vulkan {

// The process-wide instance, or VK_NULL_HANDLE when there is no loader or no driver; `why` then
// says what failed. Never throws.
VkInstance shared_instance(std::string* why = nullptr);

// Physical devices that have a compute queue, in the driver's order (empty without an instance).
std::vector<VkPhysicalDevice> compute_devices();

// What the backend and `deskside devices` need to know about a physical device.
struct DeviceCaps {
    std::string name;
    VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
    uint32_t api_version = 0;
    uint32_t vendor_id = 0;
    uint32_t driver_version = 0;  // encoded as the vendor chooses (vk_registry.cpp decodes it)
    std::string driver_name;      // VkPhysicalDeviceDriverProperties: "llvmpipe", "NVIDIA"
    std::string driver_info;      // "Mesa 22.3.6 (LLVM 15.0.6)", "550.54.14"
    uint32_t compute_queue_family = 0;
    uint64_t device_local_bytes = 0;  // largest DEVICE_LOCAL heap
    uint64_t budget_free_bytes = 0;   // heap budget - usage (VK_EXT_memory_budget), else 0
    bool has_memory_budget = false;
    // Features the shaders may use (each has a fallback path).
    bool fp16 = false;          // shaderFloat16
    bool fp64 = false;          // shaderFloat64, used for the CPU backend's bits (CPU-type devices, or DESKSIDE_VULKAN_EXACT=1)
    bool storage16 = false;     // storageBuffer16BitAccess
    bool storage8 = false;      // storageBuffer8BitAccess
    bool int8 = false;          // shaderInt8
    bool int8_dot = false;      // shaderIntegerDotProduct (VK_KHR_shader_integer_dot_product or core 1.3)
    bool subgroup_arithmetic = false;  // subgroupAdd/Max in compute shaders
    uint32_t subgroup_size = 0;
    // Limits the ops respect.
    uint64_t max_storage_buffer_range = 0;
    uint64_t min_storage_buffer_offset_alignment = 0;
    uint64_t max_memory_allocation_size = 0;
    uint32_t max_shared_memory = 0;
    uint32_t max_workgroup_invocations = 0;
    uint32_t max_workgroup_count[3] = {0, 0, 0};
    uint32_t max_push_constants = 0;
};

// The device's capabilities, less the features DESKSIDE_VULKAN_DISABLE turns off (so the
// backend and `deskside devices` see only what the shaders will use).
DeviceCaps query_caps(VkPhysicalDevice physical);

// Clears the features named in DESKSIDE_VULKAN_DISABLE, a comma-separated list of int8-dot,
// subgroup and storage16 (tests use it to run the fallback kernels on a device that has the
// features). Throws std::invalid_argument naming an unknown entry.
void apply_disabled_features(DeviceCaps& caps);

// A logical device with one compute queue and the useful optional features enabled.
class VulkanDevice {
   public:
    VulkanDevice(VkPhysicalDevice physical, DeviceCaps caps);
    ~VulkanDevice();
    VulkanDevice(const VulkanDevice&) = delete;
    VulkanDevice& operator=(const VulkanDevice&) = delete;

    VkDevice handle() const { return device_; }
    VkPhysicalDevice physical() const { return physical_; }
    VkQueue queue() const { return queue_; }
    const DeviceCaps& caps() const { return caps_; }

    // A memory type allowed by `type_bits` with all `required` flags, preferring one that also
    // has `preferred`; throws when none has `required`.
    uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const;

   private:
    VkPhysicalDevice physical_;
    DeviceCaps caps_;
    VkPhysicalDeviceMemoryProperties memory_{};
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
};

}  // namespace deskside::backends::vulkan
