#include "server/http_request_reader.h"

#include <algorithm>

namespace deskside::server {
namespace {

// cpp-httplib refuses a request line or a header line longer than this (CPPHTTPLIB_HEADER_MAX_LENGTH
// and CPPHTTPLIB_REQUEST_URI_MAX_LENGTH); refusing them here gives the client a precise status.
constexpr size_t kMaxLine = 8192;
constexpr size_t kMaxChunkSizeLine = 1024;  // the size in hex and any chunk extensions

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

// RFC 9110 5.6.2: the characters of a token (method, header name).
bool is_tchar(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// Calls f(element) for each comma-separated, trimmed, non-empty list element (RFC 9110 5.6.1).
template <typename F>
void for_each_element(std::string_view list, F f) {
    while (!list.empty()) {
        const size_t comma = list.find(',');
        const std::string_view e = trim(list.substr(0, comma));
        if (!e.empty()) f(e);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

}  // namespace

std::optional<std::string_view> HttpHead::find(std::string_view name) const {
    for (const auto& [n, v] : headers)
        if (iequals(n, name)) return std::string_view(v);
    return std::nullopt;
}

std::string HttpHead::path() const { return target.substr(0, target.find('?')); }

void RequestReader::refuse(int status, std::string reason) {
    state_ = State::kRefused;
    refused_status_ = status;
    refused_reason_ = std::move(reason);
}

size_t RequestReader::feed(std::string_view data) {
    size_t used = 0;
    if (state_ == State::kHead) {
        while (used < data.size() && raw_head_.empty() && (data[used] == '\r' || data[used] == '\n')) {
            ++used;
            if (++skipped_ > limits_.max_header_bytes) {
                refuse(400, "the request is only empty lines");
                return used;
            }
        }
        if (used == data.size()) return used;
        started_ = true;
        const size_t before = raw_head_.size();
        const size_t room = limits_.max_header_bytes + 1 - before;  // one past the limit tells "too long"
        raw_head_.append(data.substr(used, room));
        const size_t end = raw_head_.find("\r\n\r\n", before < 3 ? 0 : before - 3);
        if (end == std::string::npos) {
            used += raw_head_.size() - before;
            // A head with bare LFs never has its CRLF CRLF: refuse it now rather than at the deadline.
            // (raw_head_[0] is never a LF: empty lines before the request line were skipped.)
            for (size_t i = std::max<size_t>(before, 1); i < raw_head_.size(); ++i) {
                if (raw_head_[i] == '\n' && raw_head_[i - 1] != '\r') {
                    refuse(400, "a bare LF in the request head (lines end with CRLF)");
                    return used;
                }
            }
            const size_t first_line = raw_head_.find("\r\n");
            if ((first_line == std::string::npos ? raw_head_.size() : first_line) > kMaxLine)
                refuse(414, "the request line is longer than " + std::to_string(kMaxLine) + " bytes");
            else if (raw_head_.size() > limits_.max_header_bytes)
                refuse(431, "the request headers are larger than the server accepts (" +
                                std::to_string(limits_.max_header_bytes) + " bytes)");
            return used;
        }
        raw_head_.resize(end + 4);
        used += raw_head_.size() - before;
        parse_head();
        if (state_ != State::kBody) return used;
    }
    if (state_ == State::kBody) used += chunked_ ? feed_chunked(data.substr(used)) : feed_body(data.substr(used));
    return used;
}

void RequestReader::parse_head() {
    for (size_t i = 0; i < raw_head_.size(); ++i) {
        const bool lf_after_cr = raw_head_[i] == '\n' && i > 0 && raw_head_[i - 1] == '\r';
        const bool cr_before_lf = raw_head_[i] == '\r' && i + 1 < raw_head_.size() && raw_head_[i + 1] == '\n';
        if ((raw_head_[i] == '\n' && !lf_after_cr) || (raw_head_[i] == '\r' && !cr_before_lf))
            return refuse(400, "a bare CR or LF in the request head (lines end with CRLF)");
    }
    std::string_view rest(raw_head_);
    const auto next_line = [&rest] {
        const size_t eol = rest.find("\r\n");
        const std::string_view line = rest.substr(0, eol);
        rest.remove_prefix(eol + 2);
        return line;
    };
    const std::string_view request_line = next_line();
    if (request_line.size() > kMaxLine)
        return refuse(414, "the request line is longer than " + std::to_string(kMaxLine) + " bytes");
    const size_t sp1 = request_line.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || request_line.find(' ', sp2 + 1) != std::string_view::npos)
        return refuse(400, "the request line is not 'METHOD TARGET HTTP/1.x'");
    const std::string_view method = request_line.substr(0, sp1);
    const std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = request_line.substr(sp2 + 1);
    if (!is_token(method)) return refuse(400, "the request method is not a token");
    if (target.empty() || !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
        return refuse(400, "the request target is empty or has characters outside visible ASCII");
    if (version == "HTTP/1.1" || version == "HTTP/1.0") {
        head_.minor_version = version.back() - '0';
    } else {
        const bool http = version.size() == 8 && version.substr(0, 5) == "HTTP/" && version[6] == '.';
        return refuse(http ? 505 : 400,
                      http ? "only HTTP/1.0 and HTTP/1.1 are served" : "the request line has no HTTP version");
    }
    head_.method = method;
    head_.target = target;
    while (true) {
        const std::string_view line = next_line();
        if (line.empty()) break;
        if (line.size() > kMaxLine)
            return refuse(431, "a header line is longer than " + std::to_string(kMaxLine) + " bytes");
        if (line.front() == ' ' || line.front() == '\t') return refuse(400, "folded header lines are not accepted");
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
            return refuse(400, "a header line is not 'Name: value'");
        const std::string_view value = trim(line.substr(colon + 1));
        if (std::any_of(value.begin(), value.end(),
                        [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }))
            return refuse(400, "a header value has control characters");
        if (head_.headers.size() == limits_.max_headers)
            return refuse(431, "the request has more than " + std::to_string(limits_.max_headers) + " headers");
        head_.headers.emplace_back(line.substr(0, colon), value);
    }
    check_framing();
}

// How long the body is and how it is framed; refuses what two readers could read differently
// (request smuggling: both Content-Length and Transfer-Encoding, or disagreeing lengths).
void RequestReader::check_framing() {
    const bool http11 = head_.minor_version == 1;
    keep_alive_ = http11;
    std::optional<uint64_t> length;
    size_t hosts = 0;
    bool transfer_encoding = false, expect_continue = false;
    for (const auto& [name, value] : head_.headers) {
        if (iequals(name, "Host")) {
            ++hosts;
        } else if (iequals(name, "Transfer-Encoding")) {
            if (transfer_encoding || !iequals(value, "chunked"))
                return refuse(501, "the only transfer coding served is a single 'chunked'");
            transfer_encoding = true;
        } else if (iequals(name, "Content-Length")) {
            if (value.empty() || value.size() > 18 ||
                !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
                return refuse(400, "Content-Length is not a decimal number");
            const uint64_t n = std::stoull(value);
            if (length && *length != n) return refuse(400, "the request has Content-Length headers that disagree");
            length = n;
        } else if (iequals(name, "Content-Encoding")) {
            bool identity = true;
            for_each_element(value, [&](std::string_view e) { identity = identity && iequals(e, "identity"); });
            if (!identity) return refuse(415, "compressed request bodies are not accepted (Content-Encoding)");
        } else if (iequals(name, "Expect")) {
            if (!iequals(value, "100-continue")) return refuse(417, "the only expectation served is 100-continue");
            expect_continue = true;
        } else if (iequals(name, "Connection")) {
            for_each_element(value, [&](std::string_view e) {
                if (iequals(e, "close")) keep_alive_ = false;
                if (iequals(e, "keep-alive") && !http11) keep_alive_ = true;
            });
        }
    }
    if (hosts > 1 || (http11 && hosts == 0)) return refuse(400, "an HTTP/1.1 request needs exactly one Host header");
    if (transfer_encoding && (length || !http11))
        return refuse(400, "Transfer-Encoding is only accepted without Content-Length, in HTTP/1.1");
    if (length && *length > limits_.max_body)
        return refuse(413, "the request body is larger than the server accepts (" + std::to_string(limits_.max_body) +
                               " bytes)");
    chunked_ = transfer_encoding;
    remaining_ = length.value_or(0);
    wants_continue_ = expect_continue && http11 && (chunked_ || remaining_ > 0);
    state_ = chunked_ || remaining_ > 0 ? State::kBody : State::kComplete;
    if (remaining_ > 0) body_.reserve(remaining_);
}

size_t RequestReader::feed_body(std::string_view data) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
    body_.append(data.substr(0, take));
    remaining_ -= take;
    if (remaining_ == 0) state_ = State::kComplete;
    return take;
}

// ref: RFC 9112 7.1: chunk = size in hex [extensions] CRLF data CRLF; a 0 size, then trailer
// lines and an empty line end the body. Extensions and trailers are read and dropped.
size_t RequestReader::feed_chunked(std::string_view data) {
    size_t i = 0;
    const auto fail = [&](int status, std::string reason) {
        refuse(status, std::move(reason));
        return i;
    };
    while (i < data.size() && state_ == State::kBody) {
        if (chunk_ == Chunk::kData) {
            const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - i));
            body_.append(data.substr(i, take));
            i += take;
            remaining_ -= take;
            if (remaining_ == 0) chunk_ = Chunk::kDataEnd;
            continue;
        }
        const char c = data[i++];
        if (c == '\n' && (line_.empty() || line_.back() != '\r')) return fail(400, "a bare LF in the chunked body");
        line_ += c;
        if (chunk_ == Chunk::kDataEnd) {
            if (line_ != std::string_view("\r\n").substr(0, line_.size()))
                return fail(400, "a chunk does not end with CRLF");
            if (line_.size() == 2) chunk_ = Chunk::kSize, line_.clear();
            continue;
        }
        if (chunk_ == Chunk::kSize && line_.size() > kMaxChunkSizeLine)
            return fail(400, "a chunk size line is too long");
        if (chunk_ == Chunk::kTrailer && ++trailer_bytes_ > limits_.max_header_bytes)
            return fail(431, "the chunked body's trailers are larger than the server accepts");
        if (c != '\n') continue;
        const std::string_view line = std::string_view(line_).substr(0, line_.size() - 2);
        if (chunk_ == Chunk::kTrailer) {
            if (line.empty()) state_ = State::kComplete;
            line_.clear();
            continue;
        }
        size_t digits = 0;
        uint64_t size = 0;
        for (; digits < line.size() && hex_value(line[digits]) >= 0; ++digits) {
            size = size * 16 + static_cast<uint64_t>(hex_value(line[digits]));
            if (body_.size() + size > limits_.max_body)
                return fail(413, "the request body is larger than the server accepts (" +
                                     std::to_string(limits_.max_body) + " bytes)");
        }
        const std::string_view ext = trim(line.substr(digits));
        if (digits == 0 || (!ext.empty() && ext.front() != ';')) return fail(400, "a chunk size is not hexadecimal");
        line_.clear();
        remaining_ = size;
        chunk_ = size == 0 ? Chunk::kTrailer : Chunk::kData;
    }
    return i;
}

std::string RequestReader::canonical() const {
    std::string out = head_.method + " " + head_.target + " HTTP/1." + std::to_string(head_.minor_version) + "\r\n";
    for (const auto& [name, value] : head_.headers) {
        if (iequals(name, "Content-Length") || iequals(name, "Transfer-Encoding") ||
            iequals(name, "Content-Encoding") || iequals(name, "Expect"))
            continue;
        out += name + ": " + value + "\r\n";
    }
    out += "Content-Length: " + std::to_string(body_.size()) + "\r\n\r\n";
    out += body_;
    return out;
}

}  // namespace deskside::server
