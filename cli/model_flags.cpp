#include "cli/model_flags.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <span>
#include <stdexcept>

#include "backends/devices.h"
#include "cli/load_bar.h"
#include "cli/split_hosts.h"
#include "models/model.h"
#include "models/quantize.h"
#include "models/store/resolve.h"

namespace deskside::cli {

std::optional<std::string> model_arg(Args& args) {
    auto model = args.value("--model", "-m");
    if (model) model = models::store::resolve_model(*model);
    return model;
}

DeviceFlags read_device_flags(Args& args) {
    DeviceFlags f;
    const auto devices = args.value("--devices");
    const auto split = args.value("--split");
    f.peer_access = args.flag("--peer-access");
    const bool cpu_moe = args.flag("--cpu-moe");
    const auto n_cpu_moe = args.int_value("--n-cpu-moe");
    if (cpu_moe && n_cpu_moe) throw UsageError("give --cpu-moe (every layer) or --n-cpu-moe N, not both");
    if (n_cpu_moe && *n_cpu_moe < 0) throw UsageError("--n-cpu-moe must be >= 0");
    f.cpu_moe_layers = cpu_moe ? engine::kAllExpertLayers : n_cpu_moe.value_or(0);
    f.quantize = args.value("--quantize");
    const auto hosts = args.value("--split-hosts");
    f.given = devices || split || f.cpu_moe_layers > 0 || f.quantize;
    if (devices) {
        f.names = engine::comma_items(*devices);
        for (const std::string& name : f.names)
            if (name.empty()) throw UsageError("--devices '" + *devices + "' has an empty entry");
    }
    try {
        if (split) f.split = engine::parse_split(*split);
        if (hosts) f.hosts = engine::parse_split(*hosts);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    if (hosts && f.hosts.ratios.size() < 2)
        throw UsageError("--split-hosts needs a ratio per host, two or more (e.g. 1,1), not '" + *hosts + "'");
    if (!f.split.is_auto() && f.split.ratios.size() != f.names.size())
        throw UsageError("--split gives " + std::to_string(f.split.ratios.size()) + " ratios for " +
                         std::to_string(f.names.size()) + " devices (--devices " + (devices ? *devices : "cpu") + ")");
    return f;
}

std::vector<engine::PlanDevice> plan_device_list(const DeviceFlags& flags) {
    try {
        return engine::plan_device_list(flags.names);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

engine::ExpertOffload expert_offload(const models::ModelInfo& info, const DeviceFlags& flags) {
    engine::DeviceRequest r;
    r.cpu_moe_layers = flags.cpu_moe_layers;
    try {
        return engine::expert_offload(info, r);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

namespace {

// Quantizes `info` in memory for --quantize TYPE. A model already quantized is refused, as
// llama-quantize refuses it without --allow-requantize: quantizing again compounds the error of
// both quantizations, and the user most likely meant the F16/BF16 original.
models::ModelInfo quantize_at_load(const models::ModelInfo& info, const std::string& type, int n_threads) {
    for (const models::Tensor& t : info.tensors) {
        if (!t.data)
            throw std::logic_error(info.path + ": tensor " + t.name +
                                   " has no data to quantize (a description, not a load)");
        if (t.type != quant::TypeId::F32 && t.type != quant::TypeId::F16 && t.type != quant::TypeId::BF16) {
            throw UsageError("--quantize " + type + ": " + info.path + " is already quantized (tensor " + t.name +
                             " is " + std::string(quant::type_info(t.type).name) +
                             "); load it without --quantize, or quantize its F32/F16/BF16 original");
        }
    }
    models::QuantizeSpec spec;
    spec.type = type;
    spec.threads = n_threads;
    try {
        return models::quantize_in_memory(info, spec);
    } catch (const std::invalid_argument& e) {
        throw UsageError("--quantize " + type + ": " + e.what());
    }
}

// What a load's progress lines call the model: the file name without .gguf, or the checkpoint
// directory's name.
std::string model_label(const std::string& path) {
    std::filesystem::path p(path);
    if (!p.has_filename()) p = p.parent_path();
    return (p.extension() == ".gguf" ? p.stem() : p.filename()).string();
}

}  // namespace

engine::Plan plan_devices(const models::ModelInfo& info, std::span<const engine::PlanDevice> devices,
                          const DeviceFlags& flags, const engine::EngineOptions& options, engine::MemoryNeeds& needs) {
    if (flags.quantize) {  // the plan of the weights as --quantize will make them
        DeviceFlags as_stored = flags;
        as_stored.quantize.reset();
        return plan_devices(quantize_at_load(info, *flags.quantize, 0), devices, as_stored, options, needs);
    }
    const engine::ExpertOffload experts = expert_offload(info, flags);
    try {
        needs = engine::memory_needs(info, options.cache, options.n_batch);
        return engine::plan_placement(needs, devices, flags.split, experts);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

engine::DeviceRequest device_request(const DeviceFlags& flags, int64_t n_parallel, int n_threads) {
    engine::DeviceRequest r;
    r.names = flags.names;
    r.split = flags.split;
    r.n_parallel = n_parallel;
    r.n_threads = n_threads;
    r.peer_access = flags.peer_access;
    r.cpu_moe_layers = flags.cpu_moe_layers;
    return r;
}

engine::LoadedModel load_on_devices(models::ModelFile file, const DeviceFlags& flags,
                                    const engine::EngineOptions& options, int64_t n_parallel, int n_threads) {
    // Names and the split are checked (UsageError) before the loader opens anything.
    const std::vector<engine::PlanDevice> devices = plan_device_list(flags);
    DeviceFlags as_stored = flags;
    as_stored.quantize.reset();
    if (flags.quantize) file.info = quantize_at_load(file.info, *flags.quantize, n_threads);
    engine::MemoryNeeds needs;
    plan_devices(file.info, devices, as_stored, options, needs);
    LoadBar bar(model_label(file.info.path));
    engine::EngineOptions opts = options;
    opts.progress = [&bar, also = options.progress](const engine::LoadStep& s) {
        bar.step(s);
        if (also) also(s);
    };
    if (!flags.hosts.is_auto()) {
        return load_across_hosts(flags.hosts, [&](engine::StageLink& link) {
            engine::DeviceRequest request = device_request(flags, n_parallel, n_threads);
            request.hosts = flags.hosts;
            request.link = &link;
            return engine::load_model(std::move(file), request, opts);
        });
    }
    return engine::load_model(std::move(file), device_request(flags, n_parallel, n_threads), opts);
}

ModelFlags read_model_flags(Args& args) {
    ModelFlags f;
    const auto model = model_arg(args);
    f.threads = args.int_value("--threads", "-t").value_or(0);
    f.ctx_size = args.int_value("--ctx-size", "-c");
    const auto cache_k = args.value("--cache-type-k");
    const auto cache_v = args.value("--cache-type-v");
    f.devices = read_device_flags(args);
    if (!model) throw UsageError("-m MODEL is required");
    f.model_path = *model;
    if (f.threads < 0) throw UsageError("--threads must be >= 0");
    if (f.ctx_size && *f.ctx_size <= 0) throw UsageError("--ctx-size must be > 0");
    try {
        if (cache_k) f.cache.type_k = engine::parse_cache_type(*cache_k);
        if (cache_v) f.cache.type_v = engine::parse_cache_type(*cache_v);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    return f;
}

engine::SamplerParams read_sampling_flags(Args& args) {
    engine::SamplerParams sp;
    sp.temperature = static_cast<float>(args.float_value("--temp").value_or(sp.temperature));
    sp.top_k = static_cast<int32_t>(args.int_value("--top-k").value_or(sp.top_k));
    sp.top_p = static_cast<float>(args.float_value("--top-p").value_or(sp.top_p));
    sp.min_p = static_cast<float>(args.float_value("--min-p").value_or(sp.min_p));
    sp.repeat_penalty = static_cast<float>(args.float_value("--repeat-penalty").value_or(sp.repeat_penalty));
    sp.presence_penalty = static_cast<float>(args.float_value("--presence-penalty").value_or(sp.presence_penalty));
    sp.frequency_penalty = static_cast<float>(args.float_value("--frequency-penalty").value_or(sp.frequency_penalty));
    const auto seed = args.int_value("--seed");
    sp.seed = seed ? static_cast<uint64_t>(*seed) : std::random_device{}();
    return sp;
}

FlagsModel load_model_from_flags(const ModelFlags& flags, int64_t default_positions) {
    models::ModelFile file = models::open_model_file(flags.model_path);
    engine::EngineOptions opt;
    opt.cache = flags.cache;
    const int64_t n_train = file.info.hparams.n_ctx_train;
    opt.cache.n_positions = flags.ctx_size ? *flags.ctx_size
                            : n_train > 0  ? std::min(default_positions, n_train)
                                           : default_positions;
    FlagsModel m;
    static_cast<engine::LoadedModel&>(m) =
        load_on_devices(std::move(file), flags.devices, opt, 1, static_cast<int>(flags.threads));
    m.n_positions = opt.cache.n_positions;
    return m;
}

}  // namespace deskside::cli
