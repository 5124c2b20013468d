// The Vulkan part of the device registry (backends/devices.cpp). Built as vk_registry.cpp with
// DESKSIDE_VULKAN, as vk_registry_stub.cpp without it, so the registry needs no #ifdef.
//
// DESKSIDE_VULKAN_SPLIT=N exposes each physical device as N logical devices ("vulkan0" ..
// "vulkan{N-1}" for the first one), each with its own VkDevice, queue and allocations, and 1/N of
// the memory; tests use it to run a layer split on one GPU (or on lavapipe).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/devices.h"

namespace deskside::backends::vulkan {

// Every logical Vulkan device. When there is none, `why_none` says why (no loader, no driver,
// not built with Vulkan). Never throws.
std::vector<DeviceInfo> list_vulkan_devices(std::string* why_none = nullptr);

// Opens "vulkanN"; nullptr when no such device exists. Throws when the device fails to start.
std::unique_ptr<Backend> open_vulkan_device(const std::string& name);

// The value of DESKSIDE_VULKAN_SPLIT (1 when unset); throws std::invalid_argument when it is
// not an integer in 1..16.
int vulkan_split();

}  // namespace deskside::backends::vulkan
