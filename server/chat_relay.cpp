#include "server/chat_relay.h"

#include "server/openai_handlers.h"

namespace deskside::server {
namespace {

// The request as the chat handler should see it: the client's own, with the translated body.
httplib::Request chat_request(const httplib::Request& req, const nlohmann::json& chat_body) {
    httplib::Request inner = req;
    inner.body = chat_body.dump();
    return inner;
}

}  // namespace

nlohmann::json run_chat(const httplib::Request& req, const nlohmann::json& chat_body,
                        std::shared_ptr<ServedModel> model) {
    httplib::Response inner;
    handle_chat_completions(chat_request(req, chat_body), inner, std::move(model));
    return nlohmann::json::parse(inner.body);
}

std::string sse_event(const std::string& name, const nlohmann::ordered_json& data) {
    return "event: " + name + "\ndata: " + dump(data) + "\n\n";
}

void relay_chat_stream(const httplib::Request& req, const nlohmann::json& chat_body, std::shared_ptr<ServedModel> model,
                       httplib::Response& res, std::shared_ptr<ChatStreamTranslator> translator) {
    auto inner = std::make_shared<httplib::Response>();
    handle_chat_completions(chat_request(req, chat_body), *inner, std::move(model));
    // The chat handler left its SSE stream as a chunked content provider; it is run here with a
    // sink that parses each "data: ..." event and writes its translation to the client's sink.
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [inner, translator](size_t, httplib::DataSink& sink) {
            std::string pending;
            bool chat_done = false, ok = true;
            const auto send = [&](const std::string& text) {
                return text.empty() || sink.write(text.data(), text.size());
            };
            if (!send(translator->start())) return false;
            httplib::DataSink chat;
            chat.is_writable = [&] { return sink.is_writable(); };
            chat.done = [&] { chat_done = true; };
            chat.write = [&](const char* data, size_t n) {
                pending.append(data, n);
                for (size_t end; ok && (end = pending.find("\n\n")) != std::string::npos;) {
                    std::string event = pending.substr(0, end);
                    pending.erase(0, end + 2);
                    if (event.rfind("data: ", 0) != 0) continue;
                    event.erase(0, 6);
                    if (event == "[DONE]") continue;
                    const nlohmann::json j = nlohmann::json::parse(event);
                    ok = send(j.contains("error") ? translator->error(j) : translator->chunk(j));
                }
                return ok;
            };
            while (!chat_done && ok)
                if (!inner->content_provider_(0, 0, chat)) return false;
            if (!ok || !send(translator->end())) return false;
            sink.done();
            return true;
        },
        [inner](bool success) {
            if (inner->content_provider_resource_releaser_) inner->content_provider_resource_releaser_(success);
        });
}

}  // namespace deskside::server
