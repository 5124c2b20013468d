// libFuzzer target: the request path of `serve` up to the handlers. The bytes arrive in pieces
// (the first input byte sets their size) at the RequestReader (head grammar, framing, limits);
// a request it completes must read back as itself from its canonical form (what httplib is
// given), and its body goes through the JSON parse and the OpenAI request validation. Any input
// must be refused cleanly (a status code, an ApiError) or accepted, never crash, leak, read out
// of bounds or escape as another exception (which the server would answer with a 500).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/http_policy.h"
#include "server/http_request_reader.h"
#include "server/openai_request.h"

namespace {

using deskside::server::HttpLimits;
using deskside::server::RequestReader;

RequestReader read(std::string_view wire, size_t step, HttpLimits limits, size_t& used) {
    RequestReader r(limits);
    used = 0;
    while (used < wire.size() &&
           (r.state() == RequestReader::State::kHead || r.state() == RequestReader::State::kBody))
        used += r.feed(wire.substr(used, std::min(step, wire.size() - used)));
    return r;
}

void check(bool ok) {
    if (!ok) __builtin_trap();
}

template <typename Json, typename Parse>
void validate(const std::string& body, Parse parse) {
    try {
        (void)parse(deskside::server::parse_request_json<Json>(body));
    } catch (const deskside::server::ApiError& e) {
        check(e.status() >= 400 && e.status() < 500);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const size_t step = data[0] % 64 + 1;
    const std::string_view wire(reinterpret_cast<const char*>(data + 1), size - 1);
    HttpLimits limits;
    limits.max_header_bytes = 4096;
    limits.max_headers = 32;
    limits.max_body = 1 << 16;
    size_t used = 0;
    const RequestReader r = read(wire, step, limits, used);
    check(used <= wire.size());
    if (r.state() == RequestReader::State::kRefused) {
        const int s = r.refused_status();
        check(s == 400 || s == 413 || s == 414 || s == 415 || s == 417 || s == 431 || s == 501 || s == 505);
        return 0;
    }
    if (r.state() != RequestReader::State::kComplete) return 0;

    // The canonical form adds a Content-Length line, so it may pass the header limits by that line.
    const std::string canonical = r.canonical();
    HttpLimits again_limits = limits;
    again_limits.max_header_bytes += 64;
    again_limits.max_headers += 1;
    size_t again_used = 0;
    const RequestReader again = read(canonical, canonical.size(), again_limits, again_used);
    check(again.state() == RequestReader::State::kComplete && again_used == canonical.size());
    check(again.canonical() == canonical);
    check(again.head().method == r.head().method && again.head().target == r.head().target);

    const auto& head = r.head();
    (void)deskside::server::host_allowed(head.find("Host").value_or(""), {"desk.example"});
    (void)deskside::server::body_type(head.find("Content-Type").value_or(""));
    (void)deskside::server::cors_allow_origin(head.find("Origin").value_or(""), {"http://app.example"});
    const std::string body = canonical.substr(canonical.find("\r\n\r\n") + 4);
    (void)deskside::server::usage_in(body);
    validate<nlohmann::json>(body, deskside::server::parse_completion_request);
    validate<nlohmann::ordered_json>(body, deskside::server::parse_chat_request);
    return 0;
}
