// POST /v1/responses: OpenAI's Responses API, stateless (store false, no previous_response_id),
// mapped onto the chat route (server/chat_relay.h): `input` items and `instructions` become
// chat messages, `tools` / `tool_choice` / `text.format` the chat fields, and the chat answer
// becomes output items (a message with output_text, function_call items), streamed with the
// event types OpenAI sends. Private to server/.
#pragma once

#include <memory>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/http_server.h"

namespace deskside::server {

void handle_responses(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model);

// The chat-completions body equivalent to a Responses request; throws ApiError 400 naming the
// Responses field for what has no chat equivalent or is malformed.
nlohmann::json responses_to_chat(const nlohmann::json& body);

}  // namespace deskside::server
