#include "server/http_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

namespace deskside::server {
namespace {

std::string lowercase(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The number after `"key":` at or after `from`, or -1.
int64_t number_after(std::string_view text, std::string_view key, size_t from) {
    const size_t at = text.find(key, from);
    if (at == std::string_view::npos) return -1;
    size_t i = at + key.size();
    int64_t n = 0;
    bool any = false;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9' && n < (int64_t{1} << 50); ++i, any = true)
        n = n * 10 + (text[i] - '0');
    return any ? n : -1;
}

}  // namespace

bool host_allowed(std::string_view host_header, const std::vector<std::string>& allowed) {
    const std::string host = lowercase(trim(host_header));
    if (host.empty()) return true;
    std::string name;
    if (host.front() == '[') {  // an IPv6 literal, "[::1]:8080"
        const size_t close = host.find(']');
        if (close == std::string::npos) return false;
        in6_addr a6{};
        if (inet_pton(AF_INET6, host.substr(1, close - 1).c_str(), &a6) == 1) return true;
        name = host.substr(0, close + 1);
    } else {
        name = host.substr(0, host.rfind(':'));
        in_addr a4{};
        if (inet_pton(AF_INET, name.c_str(), &a4) == 1) return true;
    }
    if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost." is "localhost"
    if (name.find('.') == std::string::npos || ends_with(name, ".localhost")) return !name.empty();
    return std::any_of(allowed.begin(), allowed.end(),
                       [&](const std::string& a) { return a == "*" || lowercase(a) == name; });
}

BodyType body_type(std::string_view content_type) {
    const std::string_view media = trim(content_type.substr(0, content_type.find(';')));
    if (media.empty()) return BodyType::kMissing;
    return lowercase(media) == "application/json" ? BodyType::kJson : BodyType::kOther;
}

std::optional<std::string> cors_allow_origin(std::string_view origin, const std::vector<std::string>& allowed) {
    if (origin.empty()) return std::nullopt;
    for (const std::string& a : allowed) {
        if (a == "*") return "*";
        if (lowercase(a) == lowercase(origin)) return std::string(origin);
    }
    return std::nullopt;
}

TokenCounts usage_in(std::string_view text) {
    const size_t usage = text.rfind("\"usage\":{");
    if (usage == std::string_view::npos) return {};
    return {number_after(text, "\"prompt_tokens\":", usage), number_after(text, "\"completion_tokens\":", usage)};
}

std::string access_line(const AccessRecord& r, LogFormat format) {
    const std::time_t seconds = static_cast<std::time_t>(r.unix_ms / 1000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char time[64];
    std::snprintf(time, sizeof time, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                  utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(r.unix_ms % 1000));
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", r.ms);
    if (format == LogFormat::kJson) {
        const auto count = [](int64_t n) { return n < 0 ? nlohmann::json(nullptr) : nlohmann::json(n); };
        const nlohmann::ordered_json j = {{"time", time},
                                          {"client", r.client},
                                          {"method", r.method},
                                          {"path", r.path},
                                          {"status", r.status},
                                          {"prompt_tokens", count(r.tokens.prompt)},
                                          {"completion_tokens", count(r.tokens.completion)},
                                          {"ms", std::stod(ms)}};
        return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    // The path is the client's (percent-decoded): spaces, controls and non-ASCII bytes are escaped
    // so that a line is always one record of space-separated fields.
    const auto field = [](const std::string& s) {
        std::string out;
        for (const unsigned char c : s) {
            if (c > 0x20 && c < 0x7f && c != '%') {
                out += static_cast<char>(c);
            } else {
                char hex[4];
                std::snprintf(hex, sizeof hex, "%%%02X", c);
                out += hex;
            }
        }
        return out.empty() ? std::string("-") : out;
    };
    const auto count = [](int64_t n) { return n < 0 ? std::string("-") : std::to_string(n); };
    return std::string(time) + " " + field(r.client) + " " + field(r.method) + " " + field(r.path) + " " +
           std::to_string(r.status) + " tokens=" + count(r.tokens.prompt) + "/" + count(r.tokens.completion) + " " +
           ms + "ms\n";
}

}  // namespace deskside::server
