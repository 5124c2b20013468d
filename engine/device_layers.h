// Which device runs which layers of a model split across devices (DESIGN.md key decision 3).
//
// Each device owns a contiguous range of layers, with their weights and their KV cache; the
// token embedding lives on the first device and the output norm + head on the last (the reasons
// are in engine/placement.h). A single-device model is one entry covering every layer.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "backends/backend.h"

namespace deskside::engine {

struct DeviceLayers {
    backends::Backend* backend = nullptr;  // not owned; must outlive the model
    int64_t layer_begin = 0;               // first layer
    int64_t layer_end = 0;                 // one past the last layer
    // A model split across processes (--split-hosts, engine/stage_link.h): layers that the
    // process of this rank runs, with no backend here; -1 for a local device.
    int host = -1;
    bool remote() const { return host >= 0; }
};

// Throws std::invalid_argument unless the ranges are non-empty, in order, contiguous and cover
// layers [0, n_layer), and every entry has a backend or is another host's.
inline void check_device_layers(std::span<const DeviceLayers> devices, int64_t n_layer) {
    if (devices.empty()) throw std::invalid_argument("no devices given for the model's layers");
    int64_t next = 0;
    for (size_t i = 0; i < devices.size(); ++i) {
        const DeviceLayers& d = devices[i];
        const std::string where = "device " + std::to_string(i) + ": ";
        if (!d.backend && !d.remote()) throw std::invalid_argument(where + "no backend");
        if (d.layer_begin != next || d.layer_end <= d.layer_begin)
            throw std::invalid_argument(where + "layers [" + std::to_string(d.layer_begin) + ", " +
                                        std::to_string(d.layer_end) + ") do not continue at layer " +
                                        std::to_string(next) + " with at least one layer");
        next = d.layer_end;
    }
    if (next != n_layer)
        throw std::invalid_argument("the devices' layers end at " + std::to_string(next) + " but the model has " +
                                    std::to_string(n_layer));
}

}  // namespace deskside::engine
