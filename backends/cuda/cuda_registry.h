// The CUDA part of the device registry (backends/devices.cpp). Built from cuda_registry.cu with
// DESKSIDE_CUDA, from cuda_registry_stub.cpp without it, so the registry needs no #ifdef.
//
// DESKSIDE_CUDA_SPLIT=N exposes each GPU as N logical devices ("cuda0" .. "cuda{N-1}" for the
// first one), each with its own stream and allocations and 1/N of the memory, so a layer split
// is testable on one GPU (as DESKSIDE_VULKAN_SPLIT does for Vulkan).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/device_info.h"

namespace deskside::backends::cuda {

// Every logical CUDA device. When there is none, `why_absent` says why (no driver, not built
// with CUDA, the CUDA error). Never throws.
std::vector<DeviceInfo> list_cuda_devices(std::string* why_absent = nullptr);

// Opens "cudaN"; nullptr when no such device exists. Throws when the device fails to start.
std::unique_ptr<Backend> open_cuda_device(const std::string& name);

// The value of DESKSIDE_CUDA_SPLIT (1 when unset); throws std::invalid_argument when it is not
// an integer in 1..16.
int cuda_split();

// Whether CUDA devices copy to each other directly (cudaMemcpyPeerAsync) where peer access works;
// off by default (on some boards peer copies corrupt data), then copies go through host memory.
void set_cuda_peer_access(bool on);

}  // namespace deskside::backends::cuda
