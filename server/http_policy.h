// What the server accepts from a browser's point of view, and what it writes about each request:
// the Host check against DNS rebinding, the JSON-only rule for POST bodies and how deep that JSON
// may go, CORS origins and the access-log line. Plain functions of strings, so that they are tested (and fuzzed)
// alone; http_server.cpp applies them to every request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace deskside::server {

// Deeper JSON than any request needs only costs memory (a few body bytes per nested array) and
// the stack of whatever walks it afterwards.
constexpr int kMaxJsonDepth = 128;

// A request body as JSON (nlohmann::json or ordered_json); throws ApiError 400 for malformed
// JSON, nesting past kMaxJsonDepth, and numbers no double holds (1e400).
template <typename Json>
Json parse_request_json(const std::string& body) {
    const auto limit_depth = [](int depth, nlohmann::json::parse_event_t event, Json&) {
        const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                           event == nlohmann::json::parse_event_t::array_start;
        if (opens && depth >= kMaxJsonDepth)
            throw ApiError(400, "the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels", "",
                           "invalid_json");
        return true;
    };
    try {
        return Json::parse(body, limit_depth);
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e400
        throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what(), "", "invalid_json");
    }
}

// DNS rebinding: a web page on attacker.example, whose name the attacker re-points at 127.0.0.1,
// reaches a local server with "Host: attacker.example". Such a name is a registered domain, so it
// has a dot. Allowed are: IP literals, names without a dot ("localhost", the machine's own name),
// names under ".localhost", and each name in `allowed` ("*" allows every Host). The port part is
// ignored (port forwarding changes it). An absent Host (HTTP/1.0) is allowed: browsers send one.
bool host_allowed(std::string_view host_header, const std::vector<std::string>& allowed);

// Browsers send cross-origin "simple" POSTs (text/plain, forms) without asking first; requiring
// application/json makes every cross-origin POST a preflighted one, which CORS then refuses.
enum class BodyType { kJson, kMissing, kOther };
BodyType body_type(std::string_view content_type);

// The value of Access-Control-Allow-Origin for a request from `origin`, or nullopt when CORS is
// off (`allowed` empty) or the origin is not in the list. "*" in the list allows every origin.
std::optional<std::string> cors_allow_origin(std::string_view origin, const std::vector<std::string>& allowed);

// prompt_tokens and completion_tokens of the last "usage" object in a response body or SSE event;
// -1 for a count that is not there.
struct TokenCounts {
    int64_t prompt = -1, completion = -1;
};
TokenCounts usage_in(std::string_view text);

enum class LogFormat { kText, kJson };

// One access-log line (with its newline): time (UTC, ms), client, method, path, status, token
// counts (empty when unknown), milliseconds. Text escapes bytes outside printable ASCII as %XX.
struct AccessRecord {
    int64_t unix_ms = 0;
    std::string client, method, path;
    int status = 0;
    TokenCounts tokens;
    double ms = 0;
};
std::string access_line(const AccessRecord& r, LogFormat format);

}  // namespace deskside::server
