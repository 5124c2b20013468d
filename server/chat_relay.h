// The other chat-shaped APIs (/v1/responses, /v1/messages) run as translations of the chat
// route: they build the equivalent /v1/chat/completions body, run the chat handler on it as if
// the client had sent it (same connection, so a disconnect still cancels), and rewrite its
// answer. Everything the chat route learns (tools, structured output, sampler fields) reaches
// them without a second copy of rendering, tokenizing and job handling. Private to server/.
#pragma once

#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/http_server.h"

namespace deskside::server {

// The chat handler's non-streamed answer (a chat.completion body) for `chat_body`. Its
// ApiErrors propagate, naming chat fields.
nlohmann::json run_chat(const httplib::Request& req, const nlohmann::json& chat_body,
                        std::shared_ptr<ServedModel> model);

// Rewrites a streamed chat answer as another API's events. Each call returns the raw SSE text
// to send (possibly empty).
class ChatStreamTranslator {
   public:
    virtual ~ChatStreamTranslator() = default;
    virtual std::string start() = 0;                             // before the first chunk
    virtual std::string chunk(const nlohmann::json& chunk) = 0;  // one chat.completion.chunk
    virtual std::string error(const nlohmann::json& error) = 0;  // the {"error": ...} the chat stream ended with
    virtual std::string end() = 0;                               // after the chat stream's [DONE]
};

// Runs `chat_body` (with "stream": true) through the chat handler and streams its chunks,
// translated, as `res`'s body. Errors before the first chunk propagate as ApiError.
void relay_chat_stream(const httplib::Request& req, const nlohmann::json& chat_body, std::shared_ptr<ServedModel> model,
                       httplib::Response& res, std::shared_ptr<ChatStreamTranslator> translator);

// One SSE event: "event: NAME\ndata: JSON\n\n" (the shape OpenAI's Responses and Anthropic's
// Messages streams share).
std::string sse_event(const std::string& name, const nlohmann::ordered_json& data);

}  // namespace deskside::server
