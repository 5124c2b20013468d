#include "engine/loader.h"

#include <algorithm>
#include <stdexcept>

#include "backends/devices.h"

namespace deskside::engine {

std::vector<PlanDevice> plan_device_list(std::span<const std::string> names) {
    const std::vector<backends::DeviceInfo> known = backends::list_devices();
    std::vector<PlanDevice> devices;
    for (const std::string& name : names) {
        const auto it = std::find_if(known.begin(), known.end(), [&](const backends::DeviceInfo& d) { return d.name == name; });
        if (it == known.end() || !it->usable) {
            std::string usable;
            for (const backends::DeviceInfo& d : known)
                if (d.usable) usable += (usable.empty() ? "" : ", ") + d.name;
            throw std::invalid_argument("--devices: " +
                                        (it == known.end() ? "unknown device '" + name + "'"
                                                           : "device '" + name + "' is unusable (" + it->note + ")") +
                                        " (available: " + usable + ")");
        }
        devices.push_back({name, it->free_memory});
    }
    return devices;
}

std::string LoadedModel::summary() const {
    if (plan.devices.size() == 1) return plan.devices[0].name;
    std::string out;
    for (const DevicePlan& d : plan.devices)
        out += (out.empty() ? "" : ",") + d.name + "[" + std::to_string(d.layer_begin) + "-" + std::to_string(d.layer_end - 1) + "]";
    return out;
}

int LoadedModel::cpu_threads() const {
    for (const auto& b : backends)
        if (b->n_threads() > 0) return b->n_threads();
    return 0;
}

ExpertOffload expert_offload(const models::ModelInfo& info, const DeviceRequest& request) {
    ExpertOffload e;
    if (request.cpu_moe_layers <= 0) return e;
    if (info.hparams.n_expert <= 0)
        throw std::invalid_argument("--cpu-moe / --n-cpu-moe: " + info.path + " (" + info.hparams.architecture +
                                    ") is not a mixture-of-experts model");
    e.n_layers = std::min(request.cpu_moe_layers, info.hparams.n_layer);
    const std::string cpu = "cpu";
    e.host = plan_device_list(std::span<const std::string>(&cpu, 1)).front();
    return e;
}

LoadedModel load_model(models::ModelFile file, const DeviceRequest& request, const EngineOptions& options) {
    LoadedModel out;
    const std::vector<PlanDevice> devices = plan_device_list(request.names);
    const ExpertOffload experts = expert_offload(file.info, request);
    const MemoryNeeds needs = memory_needs(file.info, options.cache, options.n_batch);
    out.plan = plan_placement(needs, devices, request.split, experts);
    check_plan(out.plan, needs, devices, request.n_parallel, experts);
    backends::set_peer_access(request.peer_access);
    std::vector<DeviceLayers> layers;
    EngineOptions opts = options;
    for (size_t i = 0; i < request.names.size(); ++i) {
        out.backends.push_back(backends::open_device(request.names[i], request.n_threads));
        layers.push_back({out.backends.back().get(), out.plan.devices[i].layer_begin, out.plan.devices[i].layer_end});
        if (experts.n_layers > 0 && !opts.experts.host && request.names[i] == "cpu") opts.experts.host = out.backends.back().get();
    }
    if (experts.n_layers > 0) {
        if (!opts.experts.host) {
            out.expert_host = backends::open_device("cpu", request.n_threads);
            opts.experts.host = out.expert_host.get();
        }
        opts.experts.n_layers = experts.n_layers;
    }
    out.tokenizer = std::move(file.tokenizer);
    out.model = std::make_unique<Model>(std::move(file.info), std::move(layers), opts);
    return out;
}

}  // namespace deskside::engine
