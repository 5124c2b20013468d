// The CUDA registry of a build without DESKSIDE_CUDA: no devices, and the reason.
#include "backends/cuda/cuda_registry.h"

namespace deskside::backends::cuda {

std::vector<DeviceInfo> list_cuda_devices(std::string* why_absent) {
    if (why_absent) *why_absent = "deskside was built without CUDA (configure with -DDESKSIDE_CUDA=ON)";
    return {};
}

std::unique_ptr<Backend> open_cuda_device(const std::string&) { return nullptr; }

int cuda_split() { return 1; }

void set_cuda_peer_access(bool) {}

}  // namespace deskside::backends::cuda
