// The generating routes, /v1/completions and /v1/chat/completions: request -> jobs -> the
// response body or its SSE stream. Private to server/; http_server.cpp routes to them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>

#include "server/connection_watch.h"
#include "server/http_server.h"

namespace deskside::server {

void handle_completions(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model);
void handle_chat_completions(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model);

// One choice as it accumulates.
struct Choice {
    std::string text;
    std::vector<TokenLogprob> tokens;
    std::string finish_reason;
    bool done = false;
};

// Queues a request's jobs; throws ApiError 503 when the queue is full, 400 for a sampler refusal.
std::shared_ptr<RequestStream> submit(const ServedModel& m, std::vector<JobSpec> jobs);
// Waits for every job (their final events, in choice order); throws ApiError 500 when one
// failed, 499 when the client behind `watch` closed its connection (the jobs are cancelled).
std::vector<JobEvent> collect(RequestStream& stream, std::vector<Choice>& choices, const std::optional<ConnectionWatch>& watch);
// The client connection of `req`, to notice a disconnect while waiting.
std::optional<ConnectionWatch> watch_of(const httplib::Request& req);

// The request body as JSON; throws ApiError 400 for malformed JSON.
nlohmann::json parse_body(const httplib::Request& req);
// Serializes with invalid UTF-8 replaced (token pieces may be partial characters).
std::string dump(const nlohmann::ordered_json& j);

}  // namespace deskside::server
