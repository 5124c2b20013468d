// The chat page `deskside serve` shows at GET / (docs/WEBUI.md): the files of webui/, compiled
// into the binary by cmake/webui.cmake so that the server needs nothing beside it and works
// offline. The page itself needs no key (it asks for one when the API answers 401); the API calls
// it makes carry `Authorization: Bearer`. Every file is served with a Content-Security-Policy that
// allows only the server's own scripts, styles and API, so that text a model writes can never run.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <httplib.h>

#include "server/http_server.h"

namespace deskside::server {

// One file of webui/ as the build embedded it (defined in the generated webui_files.cpp).
struct EmbeddedFile {
    std::string_view name;   // "index.html", "app.js"
    std::string_view bytes;
};
std::span<const EmbeddedFile> embedded_webui_files();

// A file of the page with the URL it is served at: index.html at "/", the others at "/webui/NAME".
struct WebFile {
    std::string path;          // the URL path, and the route's name in /metrics
    std::string pattern;       // the same as an httplib (std::regex) route pattern
    std::string content_type;
    std::string_view body;
};
std::vector<WebFile> webui_routes();

// Answers with `file` and the headers that keep the page to its own origin (CSP, nosniff, no
// framing, no referrer).
void serve_web_file(const WebFile& file, httplib::Response& res);

// GET /v1/deskside/info: what the page shows beside the model's name: the context per sequence,
// the devices and their layers, and whether a chat template is there.
void handle_server_info(httplib::Response& res, const ServedModel& m);

}  // namespace deskside::server
