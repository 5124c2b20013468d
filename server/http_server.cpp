#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "server/anthropic_messages.h"
#include "server/api_error.h"
#include "server/embeddings.h"
#include "server/http_transport.h"
#include "server/openai_handlers.h"
#include "server/openai_responses.h"
#include "server/stack_env.h"
#include "server/tokenizer_handlers.h"
#include "server/webui.h"

namespace deskside::server {

class HttplibServer : public httplib::Server {
   public:
    // httplib writes a streamed (provider) response only while its own listening socket is
    // valid, its test for "shutting down". The transport owns the real one, so this marks the
    // library as serving; httplib's listen() and stop(), the only users of the value, are not called.
    HttplibServer() { svr_sock_ = 0; }
    using httplib::Server::process_request;
};

namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// Keep-alive as httplib announces it in every response ("Keep-Alive: timeout=5, max=100"); the
// transport holds connections to the same numbers.
constexpr int kKeepAliveSeconds = 5;
constexpr int kMaxRequestsPerConnection = 100;

// What the access log needs that httplib does not keep. The transport serves one request at a
// time on a worker thread, and httplib calls the logger on that thread once the response is out.
struct RequestLog {
    Clock::time_point start;
    TokenCounts tokens;
};
thread_local RequestLog current_request;

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

int64_t unix_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

void write_log(const AccessRecord& r, LogFormat format) {
    const std::string line = access_line(r, format);
    std::fwrite(line.data(), 1, line.size(), stderr);  // one write per line: lines of threads do not mix
}

// Streamed responses carry their usage (when asked for) in an SSE event: the provider's writes
// are watched for it.
void watch_stream_usage(httplib::Response& res) {
    auto inner = std::move(res.content_provider_);
    res.content_provider_ = [inner](size_t offset, size_t length, httplib::DataSink& sink) {
        const auto write = sink.write;
        sink.write = [write](const char* data, size_t n) {
            const std::string_view event(data, n);
            if (event.find("\"usage\":{") != std::string_view::npos) current_request.tokens = usage_in(event);
            return write(data, n);
        };
        const bool ok = inner(offset, length, sink);
        sink.write = write;
        return ok;
    };
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : options_(std::move(options)), http_(std::make_unique<HttplibServer>()) {
    http_->set_payload_max_length(options_.max_body);  // the transport enforces it first
    http_->set_keep_alive_max_count(kMaxRequestsPerConnection);
    http_->set_keep_alive_timeout(kKeepAliveSeconds);
    TransportOptions t;
    t.host = options_.host;
    t.port = options_.port;
    t.limits = {options_.max_header_bytes, options_.max_headers, options_.max_body};
    t.header_timeout_s = options_.header_timeout;
    t.body_timeout_s = options_.body_timeout;
    t.keep_alive_timeout_s = kKeepAliveSeconds;
    t.max_client_connections = options_.max_client_connections;
    t.workers = options_.http_threads;
    t.max_requests_per_connection = kMaxRequestsPerConnection;
    const auto serve = [this](httplib::Stream& stream, bool close, bool& closed) {
        current_request = {Clock::now(), {}};
        return http_->process_request(stream, close, closed, nullptr);
    };
    const auto refused = [this](const RefusedRequest& r) {
        metrics_.count_request("other", r.status);
        write_log({unix_ms(), r.client, r.method, r.path, r.status, {}, 0}, options_.log_format);
    };
    transport_ = std::make_unique<HttpTransport>(t, serve, refused);
    install_policy();
    install_routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() { return transport_->bind(); }

void HttpServer::listen() { transport_->run(); }

void HttpServer::drain() {
    draining_ = true;
    transport_->set_draining();
}

void HttpServer::stop() { transport_->stop(); }

void HttpServer::set_model(std::shared_ptr<ServedModel> model) { std::atomic_store(&model_, std::move(model)); }

std::shared_ptr<ServedModel> HttpServer::ready_model() const {
    auto m = std::atomic_load(&model_);
    if (!m) throw ApiError(503, "the model is still loading", "", "model_loading", "overloaded_error");
    return m;
}

// Checked before any route, in this order: the Host (DNS rebinding), CORS (a preflight carries
// no key), the key, and that a POST body is JSON.
void HttpServer::install_policy() {
    using Outcome = httplib::Server::HandlerResponse;
    http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        const auto refuse = [&](const ApiError& e) {
            send_error(res, e);
            metrics_.count_request(req.path, e.status());
            return Outcome::Handled;
        };
        const std::string host = req.get_header_value("Host");
        if (!host_allowed(host, options_.allow_hosts))
            return refuse(ApiError(403, "this server does not answer to the host name '" + host +
                                            "' (a guard against DNS rebinding); start it with --allow-host NAME",
                                   "", "host_not_allowed"));
        if (const auto allow = cors_allow_origin(req.get_header_value("Origin"), options_.cors_origins)) {
            res.set_header("Access-Control-Allow-Origin", *allow);
            if (*allow != "*") res.set_header("Vary", "Origin");
            if (req.method == "OPTIONS" && req.has_header("Access-Control-Request-Method")) {
                const std::string asked = req.get_header_value("Access-Control-Request-Headers");
                res.status = 204;
                res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
                res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
                res.set_header("Access-Control-Max-Age", "600");
                metrics_.count_request(req.path, 204);
                return Outcome::Handled;
            }
        }
        if (!options_.api_key.empty() && req.path.rfind("/v1/", 0) == 0) {
            const std::string header = req.get_header_value("Authorization");
            const std::string kBearer = "Bearer ";
            const std::string given = header.rfind(kBearer, 0) == 0 ? header.substr(kBearer.size()) : std::string();
            // Anthropic's clients send the key as x-api-key (the /v1/messages routes are theirs).
            const std::string anthropic = req.get_header_value("x-api-key");
            if (!same_secret(given, options_.api_key) && !same_secret(anthropic, options_.api_key))
                return refuse(
                    ApiError(401, "Incorrect API key provided", "", "invalid_api_key", "authentication_error"));
        }
        if (req.method == "POST") {
            const BodyType type = body_type(req.get_header_value("Content-Type"));
            if (type == BodyType::kMissing)
                return refuse(ApiError(400, "the request body must be JSON ('Content-Type: application/json')", "",
                                       "invalid_content_type"));
            if (type == BodyType::kOther)
                return refuse(ApiError(415, "the request body must be JSON (Content-Type: application/json), not '" +
                                                req.get_header_value("Content-Type") + "'",
                                       "", "unsupported_media_type"));
        }
        return Outcome::Unhandled;
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
    http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - current_request.start).count();
        write_log({unix_ms(), req.remote_addr, req.method, req.path, res.status, current_request.tokens, ms},
                  options_.log_format);
    });
}

void HttpServer::install_routes() {
    using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
    // Every route goes through here once: errors become OpenAI-shaped, and are counted under
    // the route's name (the only labels /metrics has, besides "other").
    const auto route = [this](const std::string& name, Handler h, bool api) {
        metrics_.add_route(name);
        return [this, name, h, api](const httplib::Request& req, httplib::Response& res) {
            try {
                if (api && draining_) throw ApiError(503, "the server is shutting down", "", "shutting_down", "overloaded_error");
                h(req, res);
            } catch (const ApiError& e) {
                send_error(res, e);
            } catch (const std::exception& e) {
                send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "", "server_error"));
            }
            const int status = res.status < 0 ? 200 : res.status;
            if (res.content_provider_) {
                // A stream is counted when it ends: as its status when it was written out whole, as
                // 499 when its client went away first (the page's Stop, a closed connection).
                watch_stream_usage(res);
                res.content_provider_resource_releaser_ = [this, name, status,
                                                           inner = std::move(res.content_provider_resource_releaser_)](
                                                              bool success) {
                    metrics_.count_request(name, success ? status : 499);
                    if (inner) inner(success);
                };
            } else {
                current_request.tokens = usage_in(res.body);
                metrics_.count_request(name, status);
            }
        };
    };

    // Load balancers take a 503 here as "send no more": while loading (with how far it has come,
    // from the bytes of weights placed), and while draining.
    http_->Get("/health", route("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (!std::atomic_load(&model_)) {
            res.status = 503;
            res.set_header("Retry-After", "1");
            // Below 1 until ready: the KV cache and scratch are allocated after the last weight.
            const double progress = std::round(std::clamp(load_progress_.load(), 0.0, 0.99) * 1000) / 1000;
            res.set_content(dump({{"status", "loading"}, {"progress", progress}}), "application/json");
            return;
        }
        if (draining_) {
            res.status = 503;
            res.set_content(R"({"status":"draining"})", "application/json");
            return;
        }
        res.set_content(R"({"status":"ok"})", "application/json");
    }, false));
    http_->Get("/metrics", route("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics_.render() + build_info_gauge(std::atomic_load(&model_).get()), "text/plain; version=0.0.4");
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

    http_->Post("/v1/embeddings", route("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) {
        handle_embeddings(req, res, *ready_model());
    }, true));
    http_->Post("/v1/responses", route("/v1/responses", [this](const httplib::Request& req, httplib::Response& res) {
        handle_responses(req, res, ready_model());
    }, true));
    // Anthropic's Messages API (errors in Anthropic's shape, see anthropic_messages.h).
    http_->Post("/v1/messages", route("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
        handle_messages(req, res, ready_model());
    }, true));
    http_->Post("/v1/messages/count_tokens", route("/v1/messages/count_tokens", [this](const httplib::Request& req,
                                                                                         httplib::Response& res) {
        handle_count_tokens(req, res, ready_model());
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

    // The chat page (webui.h): its files need no key, the API calls it makes do.
    if (options_.webui)
        for (const WebFile& f : webui_routes())
            http_->Get(f.pattern, route(f.path, [f](const httplib::Request&, httplib::Response& res) {
                serve_web_file(f, res);
            }, false));
    http_->Get("/v1/deskside/info", route("/v1/deskside/info", [this](const httplib::Request&, httplib::Response& res) {
        handle_server_info(res, *ready_model());
    }, true));
    http_->Get("/v1/deskside/env", route("/v1/deskside/env", [this](const httplib::Request&, httplib::Response& res) {
        handle_stack_env(res, *ready_model());
    }, true));
}

}  // namespace deskside::server
