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
    if (plan.devices.size() == 1 && !link) return plan.devices[0].name;
    std::string out;
    size_t local = 0;
    for (const DeviceLayers& d : model->devices()) {
        const std::string name = d.remote() ? "rank" + std::to_string(d.host) : plan.devices[local++].name;
        out += (out.empty() ? "" : ",") + name + "[" + std::to_string(d.layer_begin) + "-" + std::to_string(d.layer_end - 1) + "]";
    }
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

namespace {

// --split-hosts: each rank's layer range (the ratios split layers as --split does across devices;
// only the ranges of the returned plan are used, not its bytes).
std::vector<DevicePlan> host_ranges(const MemoryNeeds& needs, const SplitSpec& hosts) {
    std::vector<PlanDevice> ranks(hosts.ratios.size());
    for (size_t r = 0; r < ranks.size(); ++r) ranks[r].name = "rank" + std::to_string(r);
    return plan_placement(needs, ranks, hosts).devices;
}

// `needs` of the layers of `share` alone: the embedding only on the first host, the output norm
// and head only on the last (a tied head is then a copy of token_embd there, not shared).
MemoryNeeds host_needs(const MemoryNeeds& needs, const DevicePlan& share) {
    MemoryNeeds n = needs;
    const auto slice = [&](const std::vector<uint64_t>& v) {
        return v.size() == static_cast<size_t>(needs.n_layer)
                   ? std::vector<uint64_t>(v.begin() + share.layer_begin, v.begin() + share.layer_end)
                   : std::vector<uint64_t>{};
    };
    n.n_layer = share.layer_end - share.layer_begin;
    n.layer_weights = slice(needs.layer_weights);
    n.layer_experts = slice(needs.layer_experts);
    if (!share.embedding) n.embedding = 0;
    if (!share.output) n.output = 0;
    if (!share.embedding || !share.output) n.tied_head = 0;
    return n;
}

}  // namespace

LoadedModel load_model(models::ModelFile file, const DeviceRequest& request, const EngineOptions& options) {
    LoadedModel out;
    const std::vector<PlanDevice> devices = plan_device_list(request.names);
    ExpertOffload experts = expert_offload(file.info, request);
    const MemoryNeeds all = memory_needs(file.info, options.cache, options.n_batch);
    // This process's layers: all, or its rank's share (planned on its devices as a model of its own).
    std::vector<DevicePlan> hosts;
    DevicePlan share;
    share.layer_end = all.n_layer;
    share.embedding = share.output = true;
    if (!request.hosts.is_auto()) {
        if (!request.link) throw std::invalid_argument("--split-hosts without a link to the other hosts");
        hosts = host_ranges(all, request.hosts);
        share = hosts[static_cast<size_t>(request.link->rank())];
        const int64_t n_share = share.layer_end - share.layer_begin;
        experts.n_layers = std::clamp<int64_t>(experts.n_layers - share.layer_begin, 0, n_share);
    }
    const MemoryNeeds needs = hosts.empty() ? all : host_needs(all, share);
    try {
        out.plan = plan_placement(needs, devices, request.split, experts);
    } catch (const std::invalid_argument& e) {
        if (hosts.empty()) throw;
        throw std::invalid_argument("rank " + std::to_string(request.link->rank()) + " (layers " +
                                    std::to_string(share.layer_begin) + "-" + std::to_string(share.layer_end - 1) +
                                    " of --split-hosts): " + e.what());
    }
    check_plan(out.plan, needs, devices, request.n_parallel, experts);
    for (DevicePlan& d : out.plan.devices) {
        d.layer_begin += share.layer_begin;
        d.layer_end += share.layer_begin;
        d.embedding = d.embedding && share.embedding;
        d.output = d.output && share.output;
    }
    if (out.plan.host_experts) {
        out.plan.host_experts->layer_begin += share.layer_begin;
        out.plan.host_experts->layer_end += share.layer_begin;
    }
    backends::set_peer_access(request.peer_access);
    std::vector<DeviceLayers> layers;
    for (size_t r = 0; r < hosts.size() && hosts[r].layer_end <= share.layer_begin; ++r)
        layers.push_back({nullptr, hosts[r].layer_begin, hosts[r].layer_end, static_cast<int>(r)});
    EngineOptions opts = options;
    opts.hosts = request.link;
    for (size_t i = 0; i < request.names.size(); ++i) {
        out.backends.push_back(backends::open_device(request.names[i], request.n_threads));
        layers.push_back({out.backends.back().get(), out.plan.devices[i].layer_begin, out.plan.devices[i].layer_end});
        if (experts.n_layers > 0 && !opts.experts.host && request.names[i] == "cpu") opts.experts.host = out.backends.back().get();
    }
    for (size_t r = 0; r < hosts.size(); ++r)
        if (hosts[r].layer_begin >= share.layer_end)
            layers.push_back({nullptr, hosts[r].layer_begin, hosts[r].layer_end, static_cast<int>(r)});
    if (experts.n_layers > 0) {
        if (!opts.experts.host) {
            out.expert_host = backends::open_device("cpu", request.n_threads);
            opts.experts.host = out.expert_host.get();
        }
        opts.experts.n_layers = experts.n_layers + share.layer_begin;
    }
    out.tokenizer = std::move(file.tokenizer);
    out.model = std::make_unique<Model>(std::move(file.info), std::move(layers), opts);
    return out;
}

}  // namespace deskside::engine
