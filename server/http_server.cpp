#include "server/http_server.h"

#include <httplib.h>

#include "server/api_error.h"
#include "server/openai_handlers.h"
#include "server/tokenizer_handlers.h"

namespace deskside::server {
namespace {

using nlohmann::ordered_json;

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status();
    if (e.status() == 503) res.set_header("Retry-After", "1");
    res.set_content(e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// Constant-time comparison: the time taken does not depend on where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
    return diff == 0 && !b.empty();
}

}  // namespace

HttpServer::HttpServer(ServerOptions options) : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
    const int threads = options_.http_threads;
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    http_->set_payload_max_length(options_.max_body);
    install_routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
    if (!http_->bind_to_port(options_.host.c_str(), options_.port))
        throw std::runtime_error("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
    return options_.port;
}

void HttpServer::listen() { http_->listen_after_bind(); }

void HttpServer::stop() { http_->stop(); }

void HttpServer::set_model(std::shared_ptr<ServedModel> model) { std::atomic_store(&model_, std::move(model)); }

std::shared_ptr<ServedModel> HttpServer::ready_model() const {
    auto m = std::atomic_load(&model_);
    if (!m) throw ApiError(503, "the model is still loading", "", "model_loading", "overloaded_error");
    return m;
}

void HttpServer::install_routes() {
    using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
    // Every route goes through here once: errors become OpenAI-shaped, and are counted.
    const auto route = [this](const std::string& name, Handler h, bool api) {
        return [this, name, h, api](const httplib::Request& req, httplib::Response& res) {
            try {
                if (api && draining_) throw ApiError(503, "the server is shutting down", "", "shutting_down", "overloaded_error");
                h(req, res);
            } catch (const ApiError& e) {
                send_error(res, e);
            } catch (const std::exception& e) {
                send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "", "server_error"));
            }
            metrics_.count_request(name, res.status < 0 ? 200 : res.status);
        };
    };

    http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
        const std::string header = req.get_header_value("Authorization");
        const std::string kBearer = "Bearer ";
        const std::string given = header.rfind(kBearer, 0) == 0 ? header.substr(kBearer.size()) : std::string();
        if (same_secret(given, options_.api_key)) return httplib::Server::HandlerResponse::Unhandled;
        send_error(res, ApiError(401, "Incorrect API key provided", "", "invalid_api_key", "authentication_error"));
        metrics_.count_request(req.path, 401);
        return httplib::Server::HandlerResponse::Handled;
    });
    // Routes nobody matched, and httplib's own refusals (413 for a body over --max-body).
    http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        if (res.status == 404)
            send_error(res, ApiError(404, "no route for " + req.method + " " + req.path, "", "not_found", "not_found_error"));
        else if (res.status == 413)
            send_error(res, ApiError(413, "the request body is larger than the server accepts", "", "request_too_large"));
        else
            send_error(res, ApiError(res.status, "the request was refused (HTTP " + std::to_string(res.status) + ")"));
    });
    http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        send_error(res, ApiError(500, "internal error: " + what, "", "", "server_error"));
    });

    http_->Get("/health", route("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (!std::atomic_load(&model_)) throw ApiError(503, "the model is still loading", "", "model_loading", "overloaded_error");
        res.set_content(R"({"status":"ok"})", "application/json");
    }, false));
    http_->Get("/metrics", route("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics_.render(), "text/plain; version=0.0.4");
    }, false));

    const auto model_json = [](const ServedModel& m) {
        return ordered_json{{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", "deskside"},
                            {"context_length", m.n_ctx}};
    };
    http_->Get("/v1/models", route("/v1/models", [this, model_json](const httplib::Request&, httplib::Response& res) {
        const auto m = ready_model();
        res.set_content(dump({{"object", "list"}, {"data", ordered_json::array({model_json(*m)})}}), "application/json");
    }, true));
    http_->Get(R"(/v1/models/(.+))", route("/v1/models/{id}", [this, model_json](const httplib::Request& req, httplib::Response& res) {
        const auto m = ready_model();
        const std::string id = req.matches[1];
        if (id != m->id) throw ApiError(404, "The model '" + id + "' does not exist", "model", "model_not_found");
        res.set_content(dump(model_json(*m)), "application/json");
    }, true));
    http_->Post("/v1/completions", route("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
        handle_completions(req, res, ready_model());
    }, true));
    http_->Post("/v1/chat/completions", route("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        handle_chat_completions(req, res, ready_model());
    }, true));

    // Tokenizer routes (llama.cpp's and vLLM's shapes, see tokenizer_handlers.h).
    http_->Post("/tokenize", route("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
        handle_tokenize(req, res, *ready_model());
    }, true));
    http_->Post("/detokenize", route("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
        handle_detokenize(req, res, *ready_model());
    }, true));
    http_->Get("/tokenizer_info", route("/tokenizer_info", [this](const httplib::Request&, httplib::Response& res) {
        handle_tokenizer_info(res, *ready_model());
    }, true));
}

}  // namespace deskside::server
