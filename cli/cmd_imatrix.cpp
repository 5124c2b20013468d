// deskside imatrix -m MODEL --text FILE -o OUT.imatrix: the importance matrix of a model on a
// calibration text, computed as llama-imatrix computes it (engine/imatrix.h) and written in its
// GGUF form, for `deskside quantize --imatrix` and llama-quantize --imatrix alike.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "engine/imatrix.h"
#include "models/imatrix_file.h"
#include "models/model.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::cli {
namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot open");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int run(Args& args) {
    const auto model_path = model_arg(args);
    const auto text_path = args.value("--text", "-f");
    const auto out_path = args.value("--output", "-o");
    const long long n_ctx = args.int_value("--ctx-size", "-c").value_or(512);
    const long long max_chunks = args.int_value("--chunks").value_or(0);
    const long long threads = args.int_value("--threads", "-t").value_or(0);
    const DeviceFlags devices = read_device_flags(args);
    args.finish();
    if (!model_path) throw UsageError("-m MODEL is required");
    if (!text_path) throw UsageError("--text FILE is required");
    if (!out_path) throw UsageError("-o OUT.imatrix is required");
    if (n_ctx < 1) throw UsageError("-c must be positive");
    if (max_chunks < 0) throw UsageError("--chunks must be >= 0");

    models::ModelFile file = models::open_model_file(*model_path);
    const std::vector<int32_t> tokens = file.tokenizer->encode(read_text(*text_path), true, false);
    engine::ImatrixRun spec;
    spec.n_ctx = n_ctx;
    spec.max_chunks = max_chunks;
    if (file.tokenizer->add_bos()) spec.bos = file.tokenizer->bos();
    spec.progress = [](int64_t done, int64_t total) {
        std::fprintf(stderr, "\rimatrix: chunk %lld / %lld", static_cast<long long>(done),
                     static_cast<long long>(total));
        if (done == total) std::fprintf(stderr, "\n");
    };

    // One chunk is one step (llama-imatrix -b = -c), from an empty cache of n_ctx positions.
    engine::EngineOptions opt;
    opt.n_batch = n_ctx;
    opt.cache.n_positions = n_ctx;
    engine::LoadedModel opened = load_on_devices(std::move(file), devices, opt, 1, static_cast<int>(threads));
    models::Imatrix im = engine::collect_imatrix(*opened.model, tokens, spec);
    im.datasets = {*text_path};
    models::write_imatrix(*out_path, im);
    std::fprintf(stderr, "imatrix: %zu entries from %lld chunks of %lld tokens -> %s\n", im.entries.size(),
                 static_cast<long long>(im.chunk_count), n_ctx, out_path->c_str());
    return 0;
}

}  // namespace

const Command kImatrixCommand{
    "imatrix",
    "importance matrix of a model on a text, for quantize --imatrix",
    "usage: deskside imatrix -m MODEL --text FILE -o OUT.imatrix [-c 512] [--chunks N] [options]\n"
    "\n"
    "Runs FILE through the model in chunks of -c tokens (each starting with BOS, from an empty\n"
    "cache, as llama-imatrix does) and writes, for every layer weight, the sums of its input\n"
    "activations' squares per column and how many rows went in (per expert for stacked experts),\n"
    "in llama-imatrix's GGUF form: deskside quantize --imatrix and llama-quantize --imatrix read it.\n"
    "  -f, --text FILE          calibration text (at least two chunks of tokens)\n"
    "  -o, --output FILE        the imatrix file to write\n"
    "  -c, --ctx-size N         tokens per chunk (default 512)\n"
    "  --chunks N               at most N chunks (default: the whole text)\n"
    "  -t, --threads N          CPU threads (default: physical cores)\n"
    DESKSIDE_DEVICE_FLAGS_HELP,
    run,
};

}  // namespace deskside::cli
