#include "backends/vulkan/vk_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>

#include "backends/vulkan/vk_check.h"

namespace deskside::backends::vulkan {
namespace {

// The instance lives as long as the process and is never destroyed: destroying it at exit makes
// the loader unload the driver before LeakSanitizer looks, and drivers (lavapipe) keep
// allocations that only their globals point to, which then read as leaks of an unknown module.
struct InstanceHolder {
    VkInstance instance = VK_NULL_HANDLE;
    std::string why;
};

InstanceHolder& holder() {
    static InstanceHolder& h = *new InstanceHolder;
    static std::once_flag once;
    std::call_once(once, [] {
        uint32_t version = 0;
        if (vkEnumerateInstanceVersion(&version) != VK_SUCCESS || version < VK_API_VERSION_1_2) {
            h.why = "the Vulkan loader is older than 1.2";
            return;
        }
        VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
        app.pApplicationName = "deskside";
        app.pEngineName = "deskside";
        app.apiVersion = VK_API_VERSION_1_2;
        VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
        info.pApplicationInfo = &app;
        const VkResult r = vkCreateInstance(&info, nullptr, &h.instance);
        if (r != VK_SUCCESS) {
            h.instance = VK_NULL_HANDLE;
            h.why = std::string("vkCreateInstance failed: ") + result_name(r);
        }
    });
    return h;
}

bool has_extension(VkPhysicalDevice physical, const char* name) {
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> exts(n);
    vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, exts.data());
    for (const auto& e : exts)
        if (std::strcmp(e.extensionName, name) == 0) return true;
    return false;
}

bool find_compute_queue(VkPhysicalDevice physical, uint32_t* family) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, nullptr);
    std::vector<VkQueueFamilyProperties> families(n);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, families.data());
    // A compute-only family first: on discrete GPUs it runs beside graphics work.
    for (int pass = 0; pass < 2; ++pass)
        for (uint32_t i = 0; i < n; ++i) {
            const VkQueueFlags f = families[i].queueFlags;
            if (!(f & VK_QUEUE_COMPUTE_BIT)) continue;
            if (pass == 0 && (f & VK_QUEUE_GRAPHICS_BIT)) continue;
            *family = i;
            return true;
        }
    return false;
}

}  // namespace

VkInstance shared_instance(std::string* why) {
    InstanceHolder& h = holder();
    if (why) *why = h.why;
    return h.instance;
}

std::vector<VkPhysicalDevice> compute_devices() {
    VkInstance instance = shared_instance();
    if (!instance) return {};
    uint32_t n = 0;
    if (vkEnumeratePhysicalDevices(instance, &n, nullptr) != VK_SUCCESS) return {};
    std::vector<VkPhysicalDevice> all(n);
    vkEnumeratePhysicalDevices(instance, &n, all.data());
    std::vector<VkPhysicalDevice> out;
    for (VkPhysicalDevice p : all) {
        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(p, &props);
        uint32_t family = 0;
        if (props.apiVersion >= VK_API_VERSION_1_2 && find_compute_queue(p, &family)) out.push_back(p);
    }
    return out;
}

DeviceCaps query_caps(VkPhysicalDevice physical) {
    DeviceCaps c;
    const bool budget_ext = has_extension(physical, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);

    VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};  // core in 1.2
    subgroup.pNext = &driver;
    VkPhysicalDeviceMaintenance3Properties maint3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    maint3.pNext = &subgroup;
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props.pNext = &maint3;
    vkGetPhysicalDeviceProperties2(physical, &props);
    const VkPhysicalDeviceLimits& l = props.properties.limits;
    c.name = props.properties.deviceName;
    c.type = props.properties.deviceType;
    c.api_version = props.properties.apiVersion;
    c.vendor_id = props.properties.vendorID;
    c.driver_version = props.properties.driverVersion;
    c.driver_name = driver.driverName;
    c.driver_info = driver.driverInfo;
    c.max_storage_buffer_range = l.maxStorageBufferRange;
    c.min_storage_buffer_offset_alignment = l.minStorageBufferOffsetAlignment;
    c.max_memory_allocation_size = maint3.maxMemoryAllocationSize;
    c.max_shared_memory = l.maxComputeSharedMemorySize;
    c.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; ++i) c.max_workgroup_count[i] = l.maxComputeWorkGroupCount[i];
    c.max_push_constants = l.maxPushConstantsSize;
    c.subgroup_size = subgroup.subgroupSize;
    c.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                            (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);

    // The integer dot product is core in 1.3, an extension before; either way the feature bit
    // says whether shaders may use it.
    const bool dot_available =
        c.api_version >= VK_API_VERSION_1_3 || has_extension(physical, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    if (dot_available) f12.pNext = &dot;
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &f11;
    vkGetPhysicalDeviceFeatures2(physical, &features);
    c.fp16 = f12.shaderFloat16;
    // The _exact variants emulate the CPU's fused multiply-adds and sums in double. Where double runs
    // at the speed of float (a CPU device such as lavapipe) that costs little and buys the CPU
    // backend's bits; consumer GPUs run double at 1/32-1/64 rate, so there it is opt-in
    // (DESKSIDE_VULKAN_EXACT=1).
    const char* exact_env = std::getenv("DESKSIDE_VULKAN_EXACT");
    const std::string_view exact_setting = exact_env ? exact_env : "";
    if (!exact_setting.empty() && exact_setting != "0" && exact_setting != "1")
        throw std::invalid_argument("DESKSIDE_VULKAN_EXACT='" + std::string(exact_setting) + "': expected 0 or 1");
    const bool want_exact = exact_setting.empty() ? c.type == VK_PHYSICAL_DEVICE_TYPE_CPU : exact_setting == "1";
    c.fp64 = features.features.shaderFloat64 && want_exact;
    c.int8 = f12.shaderInt8;
    c.storage8 = f12.storageBuffer8BitAccess;
    c.storage16 = f11.storageBuffer16BitAccess;
    c.int8_dot = dot_available && dot.shaderIntegerDotProduct;

    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mem{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    if (budget_ext) mem.pNext = &budget;
    vkGetPhysicalDeviceMemoryProperties2(physical, &mem);
    for (uint32_t h = 0; h < mem.memoryProperties.memoryHeapCount; ++h) {
        const VkMemoryHeap& heap = mem.memoryProperties.memoryHeaps[h];
        if (!(heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) || heap.size < c.device_local_bytes) continue;
        c.device_local_bytes = heap.size;
        if (budget_ext) {
            c.has_memory_budget = true;
            c.budget_free_bytes = budget.heapBudget[h] > budget.heapUsage[h] ? budget.heapBudget[h] - budget.heapUsage[h] : 0;
        }
    }
    find_compute_queue(physical, &c.compute_queue_family);
    apply_disabled_features(c);
    return c;
}

void apply_disabled_features(DeviceCaps& caps) {
    const char* env = std::getenv("DESKSIDE_VULKAN_DISABLE");
    if (env == nullptr) return;
    const std::string_view list(env);
    size_t begin = 0;
    while (begin <= list.size()) {
        const size_t end = std::min(list.find(',', begin), list.size());
        const std::string_view name = list.substr(begin, end - begin);
        if (name == "int8-dot") {
            caps.int8_dot = false;
        } else if (name == "subgroup") {
            caps.subgroup_arithmetic = false;
        } else if (name == "storage16") {
            caps.storage16 = false;
        } else if (name == "fp64") {
            caps.fp64 = false;
        } else if (!name.empty()) {
            throw std::invalid_argument("DESKSIDE_VULKAN_DISABLE='" + std::string(list) + "': unknown feature '" +
                                        std::string(name) + "' (expected a comma-separated list of int8-dot, subgroup, storage16, fp64)");
        }
        begin = end + 1;
    }
}

VulkanDevice::VulkanDevice(VkPhysicalDevice physical, DeviceCaps caps) : physical_(physical), caps_(std::move(caps)) {
    vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

    // Enable exactly the optional features the shaders may use; each has a fallback.
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f12.shaderFloat16 = caps_.fp16;
    f12.shaderInt8 = caps_.int8;
    f12.storageBuffer8BitAccess = caps_.storage8;
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    f11.storageBuffer16BitAccess = caps_.storage16;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.features.shaderFloat64 = caps_.fp64;
    features.pNext = &f11;

    std::vector<const char*> extensions;
    if (caps_.int8_dot && caps_.api_version < VK_API_VERSION_1_3)
        extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    if (caps_.has_memory_budget) extensions.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    // Core in 1.3; the shaders only need the feature struct when they use dot products.
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
    if (caps_.int8_dot) {
        dot.shaderIntegerDotProduct = VK_TRUE;
        f12.pNext = &dot;
    }

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue.queueFamilyIndex = caps_.compute_queue_family;
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    info.pNext = &features;
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue;
    info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
    info.ppEnabledExtensionNames = extensions.data();
    vk_check(vkCreateDevice(physical_, &info, nullptr, &device_), ("vkCreateDevice on " + caps_.name).c_str());
    vkGetDeviceQueue(device_, caps_.compute_queue_family, 0, &queue_);
}

VulkanDevice::~VulkanDevice() {
    if (device_) {
        vkDeviceWaitIdle(device_);
        vkDestroyDevice(device_, nullptr);
    }
}

uint32_t VulkanDevice::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const {
    for (VkMemoryPropertyFlags want : {required | preferred, required})
        for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i)
            if ((type_bits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & want) == want) return i;
    throw std::runtime_error("vulkan: " + caps_.name + " has no memory type with flags " + std::to_string(required));
}

}  // namespace deskside::backends::vulkan
