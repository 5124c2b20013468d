// The OpenAI-compatible HTTP front end: routes, authentication, limits, SSE streaming.
//
// HTTP threads parse and validate a request, tokenize it, submit jobs to the EngineLoop and
// relay its events; they never touch the model. The server listens before the model is loaded
// (GET /health answers 503 until set_model) so orchestrators can watch start-up. Connections and
// request framing are http_transport.h's; what a request must look like to be served (Host,
// Content-Type, CORS, the key) is checked here once for every route (docs/SECURITY.md).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model.h"
#include "models/chat_template/chat_template.h"
#include "models/tokenizer/tokenizer.h"
#include "engine/engine_loop.h"
#include "server/http_policy.h"
#include "server/metrics.h"
#include "server/tool_calls.h"

namespace deskside::server {

class HttpTransport;
class HttplibServer;  // httplib::Server, with the request entry point the transport calls

// The generation loop's vocabulary, as the HTTP side uses it.
using engine::EngineLoop;
using engine::JobEvent;
using engine::JobSpec;
using engine::QueueFull;
using engine::RequestStream;
using engine::TokenLogprob;

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;
    std::string api_key;                 // empty: no authentication
    size_t max_body = 4u << 20;          // bytes; larger bodies get 413
    size_t max_header_bytes = 32u << 10;  // request line and headers; more get 431
    size_t max_headers = 100;
    double header_timeout = 10;           // seconds for a request's head, then 408
    double body_timeout = 60;             // seconds for its body, then 408
    int max_client_connections = 128;     // per client address; more get 429
    int http_threads = 32;
    std::vector<std::string> allow_hosts;   // Host names served besides IPs and dotless names; "*": any
    std::vector<std::string> cors_origins;  // empty: no CORS headers; "*": any origin
    LogFormat log_format = LogFormat::kText;  // of the access log on stderr
    bool webui = true;                        // GET / serves the chat page (server/webui.h)
};

// What the server serves once loaded.
struct ServedModel {
    std::string id;  // the name clients pass as "model"
    const models::Tokenizer* tokenizer = nullptr;
    std::optional<models::ChatTemplate> chat_template;
    EngineLoop* engine = nullptr;
    int64_t n_ctx = 0;
    int64_t n_embd = 0;                                // floats per /v1/embeddings vector
    engine::Pooling pooling = engine::Pooling::Last;  // how /v1/embeddings pools (engine/pooling.h)
    bool parse_special = false;  // control tokens written in a completions prompt are tokens, not text
    std::optional<ToolFormat> tool_format;  // --tool-parser; unset: read from the chat template
    int64_t created = 0;  // unix time, for /v1/models
    std::string devices;  // "cpu" or "vulkan0[0-2],cpu[3-5]", for /v1/deskside/info
    std::string model_path;  // the file or checkpoint served, digested by /v1/deskside/env
    int cpu_threads = 0;     // the CPU backend's threads (0: no CPU device), for /v1/deskside/env
};

class HttpServer {
   public:
    explicit HttpServer(ServerOptions options);
    ~HttpServer();

    // Binds host:port; throws std::runtime_error when that fails. Returns the bound port.
    int bind();
    // Serves until stop(); call from its own thread.
    void listen();
    // Ready: /health turns 200 and the API routes answer.
    void set_model(std::shared_ptr<ServedModel> model);
    // How far the load has come, 0..1, which /health reports until set_model.
    void set_load_progress(double fraction) { load_progress_ = fraction; }
    // New API requests get 503, /health 503 {"status":"draining"}, and every response closes its
    // connection; those in flight continue.
    void drain();
    // Closes every connection (those with a response being written after a second) and makes
    // listen() return.
    void stop();
    Metrics& metrics() { return metrics_; }

   private:
    void install_routes();
    void install_policy();
    std::shared_ptr<ServedModel> ready_model() const;

    ServerOptions options_;
    std::unique_ptr<HttplibServer> http_;
    std::unique_ptr<HttpTransport> transport_;
    Metrics metrics_;
    std::shared_ptr<ServedModel> model_;  // read and written under std::atomic_load/store
    std::atomic<bool> draining_{false};
    std::atomic<double> load_progress_{0};
};

}  // namespace deskside::server
