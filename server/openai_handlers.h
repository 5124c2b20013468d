// The generating routes, /v1/completions and /v1/chat/completions: request -> jobs -> the
// response body or its SSE stream. Private to server/; http_server.cpp routes to them.
#pragma once

#include <httplib.h>

#include "server/http_server.h"

namespace deskside::server {

void handle_completions(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model);
void handle_chat_completions(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model);

// The request body as JSON; throws ApiError 400 for malformed JSON.
nlohmann::json parse_body(const httplib::Request& req);
// Serializes with invalid UTF-8 replaced (token pieces may be partial characters).
std::string dump(const nlohmann::ordered_json& j);

}  // namespace deskside::server
