#include "server/webui.h"

#include <nlohmann/json.hpp>

#include "server/openai_handlers.h"

namespace deskside::server {
namespace {

// Only the server's own files and API: no inline script or style (text a model writes cannot run
// even if the renderer let a tag through), no other origin, no plugins, no framing.
// ref: https://www.w3.org/TR/CSP3/ (directives), https://html.spec.whatwg.org/#the-x-frame-options-header
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::string content_type_of(std::string_view name) {
    const auto ends = [&](std::string_view ext) {
        return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
    };
    if (ends(".html")) return "text/html; charset=utf-8";
    if (ends(".js")) return "text/javascript; charset=utf-8";
    if (ends(".css")) return "text/css; charset=utf-8";
    if (ends(".svg")) return "image/svg+xml";
    if (ends(".png")) return "image/png";
    return "application/octet-stream";
}

// A file name as a std::regex that matches only itself ("app.js" -> "app\.js").
std::string regex_literal(std::string_view s) {
    std::string out;
    for (const char c : s) {
        if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

}  // namespace

std::vector<WebFile> webui_routes() {
    std::vector<WebFile> out;
    for (const EmbeddedFile& f : embedded_webui_files()) {
        const bool index = f.name == "index.html";
        const std::string path = index ? "/" : "/webui/" + std::string(f.name);
        out.push_back({path, index ? "/" : "/webui/" + regex_literal(f.name), content_type_of(f.name), f.bytes});
    }
    return out;
}

void serve_web_file(const WebFile& file, httplib::Response& res) {
    res.set_header("Content-Security-Policy", kContentSecurityPolicy);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-cache");  // a new binary's page shows at the next load
    res.set_content(std::string(file.body), file.content_type);
}

void handle_server_info(httplib::Response& res, const ServedModel& m) {
    const nlohmann::ordered_json info = {{"model", m.id},
                                         {"context_length", m.n_ctx},
                                         {"devices", m.devices},
                                         {"chat_template", m.chat_template.has_value()}};
    res.set_content(dump(info), "application/json");
}

}  // namespace deskside::server
