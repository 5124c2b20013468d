// Vulkan result checking: a failed call throws with the call's description and the VkResult's name.
#pragma once

#include <vulkan/vulkan.h>

#include <string>

namespace deskside::backends::vulkan {

const char* result_name(VkResult r);

// Throws std::runtime_error("vulkan: <what>: <result>") unless r is VK_SUCCESS.
void vk_check(VkResult r, const char* what);

}  // namespace deskside::backends::vulkan
