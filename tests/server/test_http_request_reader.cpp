// RequestReader against RFC 9112's message grammar: framing by Content-Length and by chunks
// (fed whole and a byte at a time), the limits on head and body, and the refusals that keep
// two readers from reading one request two ways.
#include <catch2/catch.hpp>

#include "server/http_request_reader.h"

using deskside::server::HttpLimits;
using deskside::server::RequestReader;
using State = RequestReader::State;

namespace {

HttpLimits small_limits() {
    HttpLimits l;
    l.max_header_bytes = 512;
    l.max_headers = 8;
    l.max_body = 100;
    return l;
}

// Feeds `wire` in pieces of `step` bytes until the reader stops; returns the bytes it used.
size_t feed(RequestReader& r, const std::string& wire, size_t step = 1 << 20) {
    size_t used = 0;
    while (used < wire.size() && (r.state() == State::kHead || r.state() == State::kBody)) {
        const size_t n = r.feed(std::string_view(wire).substr(used, std::min(step, wire.size() - used)));
        used += n;
        if (n == 0) break;
    }
    return used;
}

int refusal(const std::string& wire, HttpLimits limits = small_limits()) {
    RequestReader r(limits);
    feed(r, wire);
    return r.state() == State::kRefused ? r.refused_status() : 0;
}

}  // namespace

TEST_CASE("request reader: Content-Length framing, whole and byte by byte", "[server]") {
    const std::string wire = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    for (const size_t step : {size_t{1}, size_t{7}, wire.size()}) {
        RequestReader r(small_limits());
        CHECK(feed(r, wire, step) == wire.size());
        REQUIRE(r.state() == State::kComplete);
        CHECK(r.head().method == "POST");
        CHECK(r.head().path() == "/v1/completions");
        CHECK(r.keep_alive());
        CHECK(r.canonical() == "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    }
}

TEST_CASE("request reader: a chunked body becomes a Content-Length one", "[server]") {
    const std::string wire =
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
        "5;name=value\r\nhello\r\n1\r\n!\r\n0\r\nTrailer: t\r\n\r\nGET /next HTTP/1.1\r\n";
    for (const size_t step : {size_t{1}, size_t{3}, wire.size()}) {
        RequestReader r(small_limits());
        const size_t used = feed(r, wire, step);
        REQUIRE(r.state() == State::kComplete);
        CHECK(wire.substr(used) == "GET /next HTTP/1.1\r\n");  // the pipelined request is left alone
        CHECK(r.wants_continue());
        CHECK(r.canonical() == "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nhello!");
    }
}

TEST_CASE("request reader: bodies over the limit are refused while they arrive", "[server]") {
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n") == 413);
    // Chunked: refused at the chunk that crosses the limit, before its data is read.
    RequestReader r(small_limits());
    const std::string wire =
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n32\r\n" + std::string(50, 'a') + "\r\n33\r\n";
    feed(r, wire);
    CHECK(r.state() == State::kRefused);
    CHECK(r.refused_status() == 413);
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n") == 413);
}

TEST_CASE("request reader: header bytes and count are limited", "[server]") {
    CHECK(refusal("GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(600, 'a') + "\r\n\r\n") == 431);
    std::string many = "GET / HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 8; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
    CHECK(refusal(many + "\r\n") == 431);
    // Never ending: refused as soon as the limit is passed, without waiting for the blank line.
    RequestReader r(small_limits());
    feed(r, "GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(600, 'a'));
    CHECK(r.state() == State::kRefused);
    CHECK(refusal("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n", HttpLimits{}) == 414);
}

TEST_CASE("request reader: ambiguous framing and bad grammar are refused", "[server]") {
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n") == 400);
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n") == 400);
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n") == 400);
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") == 501);
    CHECK(refusal("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n") == 400);
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\n") == 415);
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\n\r\n") == 417);
    CHECK(refusal("GET / HTTP/1.1\r\n\r\n") == 400);                        // no Host
    CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") == 400);  // two
    CHECK(refusal("GET / HTTP/2.0\r\nHost: x\r\n\r\n") == 505);
    CHECK(refusal("GET /\r\n\r\n") == 400);
    CHECK(refusal("GET / HTTP/1.1\nHost: x\r\n\r\n") == 400);  // bare LF
    CHECK(refusal("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n") == 400);
    CHECK(refusal("GET / HTTP/1.1\r\nHost : x\r\n\r\n") == 400);
    CHECK(refusal("GET / HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n") == 400);
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == 400);
    CHECK(refusal("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n") == 400);
}

TEST_CASE("request reader: keep-alive follows the version and Connection", "[server]") {
    const auto keep = [](const std::string& wire) {
        RequestReader r(small_limits());
        feed(r, wire);
        REQUIRE(r.state() == State::kComplete);
        return r.keep_alive();
    };
    CHECK(keep("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    CHECK_FALSE(keep("GET / HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n"));
    CHECK_FALSE(keep("GET / HTTP/1.0\r\n\r\n"));
    CHECK(keep("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    // Empty lines before a request are skipped (RFC 9112 2.2), and do not start it.
    RequestReader r(small_limits());
    r.feed("\r\n\r\n");
    CHECK_FALSE(r.started());
    r.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(r.state() == State::kComplete);
}
