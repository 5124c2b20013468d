// The OpenAI-compatible HTTP front end: routes, authentication, limits, SSE streaming.
//
// HTTP threads parse and validate a request, tokenize it, submit jobs to the EngineLoop and
// relay its events; they never touch the model. The server listens before the model is loaded
// (GET /health answers 503 until set_model) so orchestrators can watch start-up.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "engine/model.h"
#include "models/chat_template/chat_template.h"
#include "models/tokenizer/tokenizer.h"
#include "server/engine_loop.h"
#include "server/metrics.h"

namespace httplib {
class Server;
}

namespace deskside::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;
    std::string api_key;                 // empty: no authentication
    size_t max_body = 4u << 20;          // bytes; larger bodies get 413
    int http_threads = 32;
};

// What the server serves once loaded.
struct ServedModel {
    std::string id;  // the name clients pass as "model"
    const models::Tokenizer* tokenizer = nullptr;
    std::optional<models::ChatTemplate> chat_template;
    EngineLoop* engine = nullptr;
    int64_t n_ctx = 0;
    int64_t created = 0;  // unix time, for /v1/models
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
    // New API requests get 503; those in flight continue.
    void drain() { draining_ = true; }
    void stop();
    Metrics& metrics() { return metrics_; }

   private:
    void install_routes();
    std::shared_ptr<ServedModel> ready_model() const;

    ServerOptions options_;
    std::unique_ptr<httplib::Server> http_;
    Metrics metrics_;
    std::shared_ptr<ServedModel> model_;  // read and written under std::atomic_load/store
    std::atomic<bool> draining_{false};
};

}  // namespace deskside::server
