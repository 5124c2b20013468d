// deskside inspect MODEL [--json] [--devices LIST ...]: what a checkpoint holds, and with
// --devices how its layers would be placed, before anything is loaded.
//
// The JSON keys are stable (documented in docs/inspect.md, "placement" in docs/CLI.md); scripts
// may rely on them.
#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "engine/placement.h"
#include "models/model.h"
#include "models/store/resolve.h"

namespace deskside::cli {
namespace {

using nlohmann::ordered_json;

ordered_json optional_id(const std::optional<int64_t>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }

std::string_view rope_scaling_name(models::RopeScaling s) {
    switch (s) {
        case models::RopeScaling::None: return "none";
        case models::RopeScaling::Linear: return "linear";
        case models::RopeScaling::Yarn: return "yarn";
        case models::RopeScaling::Llama3: return "llama3";
    }
    return "none";
}

ordered_json describe(const models::ModelInfo& m) {
    const models::Hparams& hp = m.hparams;
    ordered_json j;
    j["path"] = m.path;
    j["format"] = m.format;
    j["file_size"] = m.file_size;
    j["architecture"] = hp.architecture.empty() ? ordered_json(nullptr) : ordered_json(hp.architecture);
    j["hparams"] = {
        {"n_layer", hp.n_layer},
        {"n_embd", hp.n_embd},
        {"n_head", hp.n_head},
        {"n_head_kv", hp.n_head_kv},
        {"head_dim", hp.head_dim},
        {"head_dim_v", hp.head_dim_v},
        {"n_ff", hp.n_ff},
        {"n_ctx_train", hp.n_ctx_train},
        {"n_vocab", hp.n_vocab},
        {"norm_eps", hp.norm_eps},
        {"rope",
         {{"n_rot", hp.n_rot},
          {"neox", hp.rope_neox},
          {"freq_base", hp.rope_freq_base},
          {"freq_base_swa", hp.rope_freq_base_swa},
          {"scaling", rope_scaling_name(hp.rope_scaling)},
          {"scaling_factor", hp.rope_scaling_factor},
          {"original_context", hp.rope_orig_ctx}}},
        {"sliding_window", hp.sliding_window},
        {"sliding_window_pattern", hp.sliding_window_pattern},
        {"tied_embeddings", hp.tied_embeddings},
        {"norm_weight_plus_one", hp.norm_weight_plus_one},
    };
    const models::TokenizerInfo& t = m.tokenizer;
    j["tokenizer"] = {
        {"kind", t.kind}, {"pre", t.pre},           {"n_vocab", t.n_vocab},         {"bos", optional_id(t.bos)},
        {"eos", optional_id(t.eos)},  {"unk", optional_id(t.unk)}, {"pad", optional_id(t.pad)}, {"eot", optional_id(t.eot)},
        {"add_bos", t.add_bos},       {"add_eos", t.add_eos},
    };
    j["chat_template"] = m.chat_template.has_value();
    ordered_json tensors = ordered_json::array();
    std::map<std::string, std::pair<int64_t, size_t>> by_type;  // name -> (count, bytes)
    size_t total_bytes = 0;
    for (const models::Tensor& ts : m.tensors) {
        const auto type_name = std::string(quant::type_info(ts.type).name);
        tensors.push_back({{"name", ts.name}, {"type", type_name}, {"shape", ts.shape}, {"bytes", ts.n_bytes}});
        by_type[type_name].first += 1;
        by_type[type_name].second += ts.n_bytes;
        total_bytes += ts.n_bytes;
    }
    j["n_tensors"] = m.tensors.size();
    j["n_params"] = m.n_params();
    j["tensor_bytes"] = total_bytes;
    ordered_json types = ordered_json::object();
    for (const auto& [name, cb] : by_type) types[name] = {{"tensors", cb.first}, {"bytes", cb.second}};
    j["types"] = types;
    j["tensors"] = tensors;
    return j;
}

std::string human_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
    return buf;
}

std::string local_base(double base) {
    if (base <= 0) return "";
    char buf[48];
    std::snprintf(buf, sizeof buf, " (sliding-window layers %g)", base);
    return buf;
}

void print_text(const ordered_json& j) {
    std::printf("model:         %s (%s, %s)\n", j["path"].get<std::string>().c_str(), j["format"].get<std::string>().c_str(),
                human_bytes(j["file_size"].get<double>()).c_str());
    if (j["architecture"].is_null()) {
        std::printf("architecture:  none (vocabulary only)\n");
    } else {
        const auto& h = j["hparams"];
        std::printf("architecture:  %s\n", j["architecture"].get<std::string>().c_str());
        std::printf("layers %lld, embedding %lld, heads %lld, KV heads %lld, head size %lld, FFN %lld\n",
                    h["n_layer"].get<long long>(), h["n_embd"].get<long long>(), h["n_head"].get<long long>(),
                    h["n_head_kv"].get<long long>(), h["head_dim"].get<long long>(), h["n_ff"].get<long long>());
        const auto& r = h["rope"];
        std::printf("context %lld, vocab %lld, norm eps %g\n", h["n_ctx_train"].get<long long>(),
                    h["n_vocab"].get<long long>(), h["norm_eps"].get<double>());
        std::printf("rope: base %g%s, %lld dims, %s, scaling %s x%g\n", r["freq_base"].get<double>(),
                    local_base(r["freq_base_swa"].get<double>()).c_str(),
                    r["n_rot"].get<long long>(), r["neox"].get<bool>() ? "neox" : "normal",
                    r["scaling"].get<std::string>().c_str(), r["scaling_factor"].get<double>());
        if (h["sliding_window"].get<long long>() > 0) {
            std::printf("sliding window %lld (pattern %lld: layers with index %% pattern == pattern-1 are global)\n", h["sliding_window"].get<long long>(),
                        h["sliding_window_pattern"].get<long long>());
        }
    }
    const auto& t = j["tokenizer"];
    auto id = [](const ordered_json& v) { return v.is_null() ? std::string("-") : std::to_string(v.get<long long>()); };
    std::printf("tokenizer:     %s%s, %lld tokens, bos %s eos %s unk %s pad %s eot %s\n", t["kind"].get<std::string>().c_str(),
                t["pre"].get<std::string>().empty() ? "" : (" (" + t["pre"].get<std::string>() + ")").c_str(),
                t["n_vocab"].get<long long>(), id(t["bos"]).c_str(), id(t["eos"]).c_str(), id(t["unk"]).c_str(),
                id(t["pad"]).c_str(), id(t["eot"]).c_str());
    std::printf("chat template: %s\n", j["chat_template"].get<bool>() ? "yes" : "no");
    std::printf("tensors:       %zu, %lld parameters, %s\n", j["n_tensors"].get<size_t>(), j["n_params"].get<long long>(),
                human_bytes(j["tensor_bytes"].get<double>()).c_str());
    for (const auto& [name, v] : j["types"].items()) {
        std::printf("  %-8s %5lld tensors  %s\n", name.c_str(), v["tensors"].get<long long>(),
                    human_bytes(v["bytes"].get<double>()).c_str());
    }
    std::printf("\n%-40s %-8s %-24s %s\n", "name", "type", "shape", "bytes");
    for (const auto& ts : j["tensors"]) {
        std::string shape;
        for (const auto& d : ts["shape"]) shape += (shape.empty() ? "" : " x ") + std::to_string(d.get<long long>());
        std::printf("%-40s %-8s %-24s %zu\n", ts["name"].get<std::string>().c_str(), ts["type"].get<std::string>().c_str(),
                    shape.c_str(), ts["bytes"].get<size_t>());
    }
}

// The placement options: present when --devices or --split is given.
struct PlacementFlags {
    DeviceFlags devices;
    std::optional<long long> ctx;
    long long parallel = 1;
    engine::EngineOptions options;
};

std::optional<PlacementFlags> read_placement_flags(Args& args) {
    PlacementFlags f;
    f.devices = read_device_flags(args);
    f.ctx = args.int_value("--ctx-size", "-c");
    const auto parallel = args.int_value("--parallel", "-np");
    const auto batch = args.int_value("--batch-size", "-b");
    f.parallel = parallel.value_or(1);
    f.options.n_batch = batch.value_or(f.options.n_batch);
    const auto cache_k = args.value("--cache-type-k");
    const auto cache_v = args.value("--cache-type-v");
    if (f.ctx && *f.ctx < 1) throw UsageError("--ctx-size must be >= 1");
    if (f.parallel < 1) throw UsageError("--parallel must be >= 1");
    if (f.options.n_batch < 1) throw UsageError("--batch-size must be >= 1");
    try {
        if (cache_k) f.options.cache.type_k = engine::parse_cache_type(*cache_k);
        if (cache_v) f.options.cache.type_v = engine::parse_cache_type(*cache_v);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    if (!f.devices.given) {
        if (f.ctx || parallel || batch || cache_k || cache_v)
            throw UsageError("--ctx-size, --parallel, --batch-size and --cache-type-* describe a placement: give --devices too");
        return std::nullopt;
    }
    return f;
}

// The plan as JSON; "error" holds check_plan's message when it does not fit.
ordered_json describe_placement(const models::ModelInfo& m, PlacementFlags& f) {
    const models::Hparams& hp = m.hparams;
    // Like serve: the model's training context, at most 4096, per sequence.
    const int64_t ctx = f.ctx ? *f.ctx : std::min<int64_t>(hp.n_ctx_train > 0 ? hp.n_ctx_train : 4096, 4096);
    const int64_t bs = f.options.cache.block_size;
    f.options.cache.n_positions = f.parallel * ((ctx + bs - 1) / bs) * bs;
    const std::vector<engine::PlanDevice> devices = plan_device_list(f.devices);
    engine::MemoryNeeds needs;
    const engine::Plan plan = plan_devices(m, devices, f.devices, f.options, needs);
    const engine::ExpertOffload experts = expert_offload(m, f.devices);
    ordered_json j;
    j["split"] = f.devices.split.is_auto() ? "auto" : "ratios";
    j["layers_per_device"] = plan.split_text();
    j["ctx_size"] = ctx;
    j["parallel"] = f.parallel;
    j["kv_positions"] = f.options.cache.n_positions;
    j["cache_type_k"] = std::string(quant::type_info(f.options.cache.type_k).name);
    j["cache_type_v"] = std::string(quant::type_info(f.options.cache.type_v).name);
    j["batch_size"] = f.options.n_batch;
    const auto device_json = [](const engine::DevicePlan& d) {
        return ordered_json{{"name", d.name},
                            {"layers", {d.layer_begin, d.layer_end}},
                            {"embedding", d.embedding},
                            {"output", d.output},
                            {"weight_bytes", d.weight_bytes},
                            {"expert_bytes", d.expert_bytes},
                            {"kv_bytes", d.kv_bytes},
                            {"scratch_bytes", d.scratch_bytes},
                            {"total_bytes", d.total_bytes()},
                            {"free_bytes", d.free_memory},
                            {"fits", d.fits()}};
    };
    ordered_json list = ordered_json::array();
    for (const engine::DevicePlan& d : plan.devices) list.push_back(device_json(d));
    j["devices"] = list;
    // The experts kept in host memory (--cpu-moe / --n-cpu-moe): their layers, bytes and scratch.
    j["host_experts"] = plan.host_experts ? device_json(*plan.host_experts) : ordered_json(nullptr);
    j["fits"] = plan.fits();
    j["error"] = nullptr;
    try {
        engine::check_plan(plan, needs, devices, f.parallel, experts);
    } catch (const std::runtime_error& e) {
        j["error"] = e.what();
    }
    return j;
}

void print_placement(const ordered_json& p) {
    std::printf("\nplacement:     %s layers per device (%s), context %lld x %lld sequences, KV cache %s/%s, batch %lld\n",
                p["layers_per_device"].get<std::string>().c_str(), p["split"].get<std::string>().c_str(),
                p["ctx_size"].get<long long>(), p["parallel"].get<long long>(), p["cache_type_k"].get<std::string>().c_str(),
                p["cache_type_v"].get<std::string>().c_str(), p["batch_size"].get<long long>());
    std::printf("  %-10s %-12s %-14s %12s %12s %12s %12s %12s %12s\n", "device", "layers", "holds", "weights", "(experts)",
                "KV cache", "scratch", "total", "free");
    const auto row = [](const ordered_json& d, bool host_experts) {
        const long long b = d["layers"][0].get<long long>(), e = d["layers"][1].get<long long>();
        const std::string layers = e - b == 1 ? std::to_string(b) : std::to_string(b) + "-" + std::to_string(e - 1);
        std::string holds = d["embedding"].get<bool>() ? "embd" : "";
        if (d["output"].get<bool>()) holds += holds.empty() ? "output" : "+output";
        if (host_experts) holds = "experts only";
        std::printf("  %-10s %-12s %-14s %12s %12s %12s %12s %12s %12s%s\n", d["name"].get<std::string>().c_str(), layers.c_str(),
                    holds.empty() ? "-" : holds.c_str(), human_bytes(d["weight_bytes"].get<double>()).c_str(),
                    human_bytes(d["expert_bytes"].get<double>()).c_str(), human_bytes(d["kv_bytes"].get<double>()).c_str(),
                    human_bytes(d["scratch_bytes"].get<double>()).c_str(), human_bytes(d["total_bytes"].get<double>()).c_str(),
                    human_bytes(d["free_bytes"].get<double>()).c_str(), d["fits"].get<bool>() ? "" : "  DOES NOT FIT");
    };
    for (const auto& d : p["devices"]) row(d, false);
    if (!p["host_experts"].is_null()) row(p["host_experts"], true);
}

int run(Args& args) {
    const bool json = args.flag("--json");
    std::optional<PlacementFlags> placement = read_placement_flags(args);
    const auto pos = args.positionals();
    args.finish();
    if (pos.size() != 1) throw UsageError("expected exactly one MODEL");
    const models::ModelInfo m = models::load_model(models::store::resolve_model(pos[0]));
    ordered_json j = describe(m);
    if (placement) j["placement"] = describe_placement(m, *placement);
    if (json) {
        std::printf("%s\n", j.dump(1, ' ', false, ordered_json::error_handler_t::replace).c_str());
    } else {
        print_text(j);
        if (placement) print_placement(j["placement"]);
    }
    if (placement && !j["placement"]["error"].is_null()) {
        std::fflush(stdout);
        throw std::runtime_error(j["placement"]["error"].get<std::string>());
    }
    return 0;
}

}  // namespace

const Command kInspectCommand{
    "inspect",
    "metadata, hyperparameters, tokenizer and tensors of a model",
    "usage: deskside inspect MODEL [--json] [--devices LIST [--split R1,R2|auto] [-c N] [-np P]]\n"
    "\n"
    "MODEL is a GGUF file or a Hugging Face checkpoint directory. Prints the architecture,\n"
    "hyperparameters, tokenizer, whether a chat template is present, and the tensor table with\n"
    "totals per type. --json prints the same as one JSON object (keys in docs/inspect.md).\n"
    "\n"
    "With --devices (or --split), also prints the placement plan: the layers, weights, KV cache and\n"
    "scratch of each device against its free memory, before anything is loaded. Exit code 1 when\n"
    "the plan does not fit, with the device, the shortfall and a split or context that fits.\n"
    "\n"
    "placement options:\n"
    DESKSIDE_DEVICE_FLAGS_HELP
    "  -c, --ctx-size N         context per sequence (default: the model's, at most 4096)\n"
    "  -np, --parallel P        sequences served at once (default 1)\n"
    "  -b, --batch-size N       tokens per step, sizes the scratch (default 512)\n"
    "  --cache-type-k T, --cache-type-v T   f16 (default), q8_0 or f32\n",
    run,
};

}  // namespace deskside::cli
