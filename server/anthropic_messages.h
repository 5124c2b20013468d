// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API mapped onto the
// chat route (server/chat_relay.h). system / messages (text, tool_use, tool_result blocks) /
// tools / tool_choice / stop_sequences become chat fields; the chat answer becomes content blocks
// with Anthropic's stop_reason, streamed as Anthropic's SSE events. Errors take Anthropic's
// shape ({"type": "error", "error": {"type", "message"}}), since its clients read that one.
// Private to server/.
#pragma once

#include <memory>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/http_server.h"

namespace deskside::server {

void handle_messages(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model);
void handle_count_tokens(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model);

// The chat-completions body equivalent to a Messages request (`count` for count_tokens, which
// takes no max_tokens nor sampling fields); throws ApiError 400 naming the Messages field.
nlohmann::json messages_to_chat(const nlohmann::json& body, bool count);

}  // namespace deskside::server
