// Reading one HTTP/1.x request off the wire, incrementally and within limits.
//
// The HTTP library deskside uses (Debian's cpp-httplib 0.11) reads requests on a worker thread
// with no bound on total header bytes, header count or chunked body size, and with no deadline
// that spans a whole request. So the transport (http_transport.h) reads every request with this
// reader first: bytes go in as they arrive, the reader says when the request is complete, refuses
// it with a status code the moment it breaks a limit or the grammar, and hands the library one
// canonical request (Content-Length framing, no Transfer-Encoding or Expect) that it cannot read
// differently. ref: RFC 9112 (HTTP/1.1 message syntax), sections 2-7.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deskside::server {

struct HttpLimits {
    size_t max_header_bytes = 32u << 10;  // request line + header lines + the blank line (and trailers)
    size_t max_headers = 100;
    size_t max_body = 4u << 20;  // decoded body bytes, whatever the framing
};

struct HttpHead {
    std::string method;
    std::string target;  // as sent: origin-form "/path?query", or absolute-form
    int minor_version = 1;
    std::vector<std::pair<std::string, std::string>> headers;  // names as sent, values trimmed
    // The first value of a header (names compare case-insensitively), nullopt when absent.
    std::optional<std::string_view> find(std::string_view name) const;
    std::string path() const;  // the target up to '?'
};

class RequestReader {
   public:
    enum class State { kHead, kBody, kComplete, kRefused };

    explicit RequestReader(HttpLimits limits) : limits_(limits) {}

    // Takes bytes of the connection; returns how many belong to this request. Reading stops at
    // the end of the request (the rest is the next, pipelined one) or at a refusal.
    size_t feed(std::string_view data);

    State state() const { return state_; }
    bool started() const { return started_; }  // some byte of this request arrived
    // From kBody on:
    const HttpHead& head() const { return head_; }
    // The client sent "Expect: 100-continue" and waits for a 100 before sending its body.
    bool wants_continue() const { return wants_continue_; }
    // Whether the connection may carry another request after this one (version and Connection).
    bool keep_alive() const { return keep_alive_; }
    // kRefused: the status (400, 408, 413, 415, 417, 431, 501, 505) and why.
    int refused_status() const { return refused_status_; }
    const std::string& refused_reason() const { return refused_reason_; }

    // kComplete: the request as the HTTP library reads it: the request line, the headers but
    // Content-Length, Transfer-Encoding, Content-Encoding and Expect, "Content-Length: N", the body.
    std::string canonical() const;

   private:
    void refuse(int status, std::string reason);
    void parse_head();
    void check_framing();
    size_t feed_body(std::string_view data);
    size_t feed_chunked(std::string_view data);

    HttpLimits limits_;
    State state_ = State::kHead;
    bool started_ = false;
    std::string raw_head_;  // up to and including the blank line
    size_t skipped_ = 0;    // empty lines before the request line (RFC 9112 2.2 lets us ignore them)
    HttpHead head_;
    bool keep_alive_ = true;
    bool wants_continue_ = false;
    int refused_status_ = 0;
    std::string refused_reason_;

    // Body framing.
    bool chunked_ = false;
    uint64_t remaining_ = 0;  // Content-Length bytes still to come, or the current chunk's
    enum class Chunk { kSize, kData, kDataEnd, kTrailer } chunk_ = Chunk::kSize;
    std::string line_;  // the chunk-size or trailer line being read
    size_t trailer_bytes_ = 0;
    std::string body_;
};

}  // namespace deskside::server
