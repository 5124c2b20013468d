// deskside fits MODEL|URL [--devices LIST] [-c N] [--json]: whether a model
// fits the devices, and the largest context that does, from its header alone.
// For an http(s):// or hf:// URL only the GGUF header is fetched
// (models/store/gguf_remote.h), so the answer comes before a download.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/placement_report.h"
#include "models/gguf.h"
#include "models/store/gguf_remote.h"
#include "models/store/pull.h"
#include "models/store/resolve.h"

namespace deskside::cli {
namespace {

using nlohmann::ordered_json;

int run(Args& args) {
    const bool json = args.flag("--json");
    PlacementFlags flags = read_placement_flags(args);
    const auto free = read_free_flag(args);
    const auto pos = args.positionals();
    args.finish();
    if (pos.size() != 1) throw UsageError("expected exactly one MODEL (a path, a store name or a URL)");
    if (flags.devices.quantize)
        throw UsageError(
            "--quantize: fits plans the file as it is stored "
            "(quantizing needs the weights themselves)");
    const std::vector<engine::PlanDevice> devices = placement_devices(flags, free);

    ordered_json j;
    j["model"] = pos[0];
    std::string url;
    models::ModelInfo m;
    try {
        if (models::store::classify_source(pos[0], &url) == models::store::SourceKind::Http) {
            const models::store::RemoteHeader h = models::store::read_remote_gguf_header(url);
            m = models::describe_gguf(h.file);
            j["url"] = url;
            j["header_bytes_received"] = h.bytes_received;
            j["header_requests"] = h.requests;
            j["ranges_ignored"] = h.ranges_ignored;
        } else {
            m = models::load_model(models::store::resolve_model(pos[0]));
            j["url"] = nullptr;
        }
    } catch (const std::invalid_argument& e) {  // a malformed hf:// source or HF_ENDPOINT
        throw UsageError(e.what());
    }
    j["file_size"] = m.file_size;
    j["architecture"] = m.hparams.architecture;
    j["n_layer"] = m.hparams.n_layer;
    j["n_ctx_train"] = m.hparams.n_ctx_train;
    j.update(describe_fit(m, flags, devices));

    if (json) {
        std::printf("%s\n", j.dump(1, ' ', false, ordered_json::error_handler_t::replace).c_str());
    } else {
        std::printf("model:         %s (%s, %s, %lld layers, trained context %lld)\n", pos[0].c_str(),
                    m.hparams.architecture.c_str(), engine::format_bytes(m.file_size).c_str(),
                    static_cast<long long>(m.hparams.n_layer), static_cast<long long>(m.hparams.n_ctx_train));
        if (!url.empty()) {
            std::printf(
                "header:        %llu bytes read in %d request%s (%.2f%% of "
                "the file)%s\n",
                static_cast<unsigned long long>(j["header_bytes_received"].get<uint64_t>()),
                j["header_requests"].get<int>(), j["header_requests"].get<int>() == 1 ? "" : "s",
                m.file_size ? 100.0 * j["header_bytes_received"].get<double>() / double(m.file_size) : 0.0,
                j["ranges_ignored"].get<bool>() ? "; the server ignores Range requests" : "");
        }
        print_fit(j);
    }
    return j["fits"].get<bool>() ? 0 : 1;
}

}  // namespace

const Command kFitsCommand{
    "fits",
    "whether a model fits the devices, and how much context, from its header "
    "alone (before a download)",
    "usage: deskside fits MODEL|URL [--json] [--devices LIST [--split "
    "R1,R2|auto]] [--free SIZES]\n"
    "                    [-c N] [-np P] [-b N] [--cache-type-k T] "
    "[--cache-type-v T]\n"
    "\n"
    "MODEL is a GGUF file, a Hugging Face checkpoint directory, a store name, "
    "an http(s):// URL of a\n"
    "GGUF file or hf://ORG/REPO/FILE.gguf (as `deskside pull` maps it; "
    "$HF_ENDPOINT replaces\n"
    "https://huggingface.co). Of a URL only the header (metadata and tensor "
    "table) is fetched, with\n"
    "HTTP Range requests: a few hundred KiB to a few MiB, never the weights.\n"
    "\n"
    "Prints the placement plan (the layers, weights, KV cache and scratch of "
    "each device against its\n"
    "free memory), whether it fits, why not, and the largest context per "
    "sequence that fits (searched\n"
    "up to the model's training context, or -c when larger). --json prints the "
    "same as one object\n"
    "(keys in docs/CLI.md). Exit code 0 when it fits, 1 when it does not (or "
    "on an error), 2 for bad\n"
    "flags.\n"
    "\n"
    "placement options:\n"
    "  --devices LIST           devices to split the model's layers across "
    "(default cpu)\n"
    "  --split R1,R2|auto       layers per device in these ratios, or auto: by "
    "free memory\n"
    "  --cpu-moe, --n-cpu-moe N keep (the first N layers') experts in host "
    "memory\n"
    "  --free SIZES             plan against this free memory, one size per "
    "--devices entry\n"
    "                           (24GiB, 512MiB, bytes), not what the devices "
    "report now; the\n"
    "                           names are then labels and need not be devices "
    "of this machine\n"
    "  -c, --ctx-size N         context per sequence (default: the model's, at "
    "most 4096)\n"
    "  -np, --parallel P        sequences served at once (default 1)\n"
    "  -b, --batch-size N       tokens per step, sizes the scratch (default "
    "512)\n"
    "  --cache-type-k T, --cache-type-v T   f16 (default), q8_0 or f32\n",
    run,
};

}  // namespace deskside::cli
