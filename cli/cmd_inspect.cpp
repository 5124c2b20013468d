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
#include "cli/placement_report.h"
#include "engine/placement.h"
#include "models/model.h"
#include "models/store/resolve.h"

namespace deskside::cli {
namespace {

using nlohmann::ordered_json;

ordered_json optional_id(const std::optional<int64_t>& v) {
    return v ? ordered_json(*v) : ordered_json(nullptr);
}

std::string_view rope_scaling_name(models::RopeScaling s) {
    switch (s) {
        case models::RopeScaling::None:
            return "none";
        case models::RopeScaling::Linear:
            return "linear";
        case models::RopeScaling::Yarn:
            return "yarn";
        case models::RopeScaling::Llama3:
            return "llama3";
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
        {"kind", t.kind},
        {"pre", t.pre},
        {"n_vocab", t.n_vocab},
        {"bos", optional_id(t.bos)},
        {"eos", optional_id(t.eos)},
        {"unk", optional_id(t.unk)},
        {"pad", optional_id(t.pad)},
        {"eot", optional_id(t.eot)},
        {"add_bos", t.add_bos},
        {"add_eos", t.add_eos},
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

std::string local_base(double base) {
    if (base <= 0) return "";
    char buf[48];
    std::snprintf(buf, sizeof buf, " (sliding-window layers %g)", base);
    return buf;
}

void print_text(const ordered_json& j) {
    std::printf("model:         %s (%s, %s)\n", j["path"].get<std::string>().c_str(),
                j["format"].get<std::string>().c_str(), engine::format_bytes(j["file_size"].get<uint64_t>()).c_str());
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
                    local_base(r["freq_base_swa"].get<double>()).c_str(), r["n_rot"].get<long long>(),
                    r["neox"].get<bool>() ? "neox" : "normal", r["scaling"].get<std::string>().c_str(),
                    r["scaling_factor"].get<double>());
        if (h["sliding_window"].get<long long>() > 0) {
            std::printf("sliding window %lld (pattern %lld: layers with index %% pattern == pattern-1 are global)\n",
                        h["sliding_window"].get<long long>(), h["sliding_window_pattern"].get<long long>());
        }
    }
    const auto& t = j["tokenizer"];
    auto id = [](const ordered_json& v) { return v.is_null() ? std::string("-") : std::to_string(v.get<long long>()); };
    std::printf("tokenizer:     %s%s, %lld tokens, bos %s eos %s unk %s pad %s eot %s\n",
                t["kind"].get<std::string>().c_str(),
                t["pre"].get<std::string>().empty() ? "" : (" (" + t["pre"].get<std::string>() + ")").c_str(),
                t["n_vocab"].get<long long>(), id(t["bos"]).c_str(), id(t["eos"]).c_str(), id(t["unk"]).c_str(),
                id(t["pad"]).c_str(), id(t["eot"]).c_str());
    std::printf("chat template: %s\n", j["chat_template"].get<bool>() ? "yes" : "no");
    std::printf("tensors:       %zu, %lld parameters, %s\n", j["n_tensors"].get<size_t>(),
                j["n_params"].get<long long>(), engine::format_bytes(j["tensor_bytes"].get<uint64_t>()).c_str());
    for (const auto& [name, v] : j["types"].items()) {
        std::printf("  %-8s %5lld tensors  %s\n", name.c_str(), v["tensors"].get<long long>(),
                    engine::format_bytes(v["bytes"].get<uint64_t>()).c_str());
    }
    std::printf("\n%-40s %-8s %-24s %s\n", "name", "type", "shape", "bytes");
    for (const auto& ts : j["tensors"]) {
        std::string shape;
        for (const auto& d : ts["shape"]) shape += (shape.empty() ? "" : " x ") + std::to_string(d.get<long long>());
        std::printf("%-40s %-8s %-24s %zu\n", ts["name"].get<std::string>().c_str(),
                    ts["type"].get<std::string>().c_str(), shape.c_str(), ts["bytes"].get<size_t>());
    }
}

int run(Args& args) {
    const bool json = args.flag("--json");
    // The placement options: a plan is printed when --devices or --split is given.
    PlacementFlags flags = read_placement_flags(args);
    if (!flags.devices.given && flags.sizing_given)
        throw UsageError(
            "--ctx-size, --parallel, --batch-size and --cache-type-* describe a placement: give --devices too");
    const bool placement = flags.devices.given;
    const auto pos = args.positionals();
    args.finish();
    if (pos.size() != 1) throw UsageError("expected exactly one MODEL");
    const std::string path = models::store::resolve_model(pos[0]);
    // --quantize quantizes the weights to plan them, so they are read (a checkpoint's experts stacked)
    const models::ModelInfo m = flags.devices.quantize ? models::open_model_file(path).info : models::load_model(path);
    ordered_json j = describe(m);
    if (placement) j["placement"] = describe_placement(m, flags, plan_device_list(flags.devices));
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
    "placement options:\n" DESKSIDE_DEVICE_FLAGS_HELP
    "  -c, --ctx-size N         context per sequence (default: the model's, at most 4096)\n"
    "  -np, --parallel P        sequences served at once (default 1)\n"
    "  -b, --batch-size N       tokens per step, sizes the scratch (default 512)\n"
    "  --cache-type-k T, --cache-type-v T   f16 (default), q8_0 or f32\n",
    run,
};

}  // namespace deskside::cli
