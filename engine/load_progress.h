// Progress of placing a model's weights on its devices, for the front ends' feedback (a bar on a
// terminal, serve's /health). Placing is what takes the time: the CPU backend repacks matrices
// (faulting the file's pages in from disk as it reads them), a GPU backend uploads them. The
// loader reports bytes per device, devices filled one after another in --devices order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace deskside::engine {

struct LoadStep {
    std::string device;       // as the backend names itself: "cpu", "vulkan0"
    const char* action = "";  // "repacking" (a device in host memory) or "uploading"
    int device_index = 0;     // which of the devices being filled, from 0
    int n_devices = 1;
    uint64_t device_done = 0;  // bytes of this device's weights placed so far
    uint64_t device_total = 0;
    uint64_t done = 0;  // bytes placed on every device so far
    uint64_t total = 0;
    double fraction() const { return total ? static_cast<double>(done) / static_cast<double>(total) : 1.0; }
};

// Called once with device_done 0 before a device's first tensor, then after each tensor placed.
// A callback may throw to stop the load (Ctrl-C while loading): the exception leaves the Model's
// constructor and load_model, and what was placed so far is freed.
using LoadProgress = std::function<void(const LoadStep&)>;

}  // namespace deskside::engine
