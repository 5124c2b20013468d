#include "models/store/gguf_remote.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "models/store/http_fetch.h"

namespace deskside::models::store {
namespace {

constexpr uint64_t kFirstRead = uint64_t{256} << 10;

// One ranged GET's state, shared with libcurl's callbacks.
struct RangeRead {
    CURL* curl = nullptr;
    uint64_t begin = 0, end = 0;  // the bytes [begin, end) asked for
    std::vector<uint8_t>* out = nullptr;
    std::string content_range;  // of the last response (a redirect's headers come first)
    bool checked = false;
    uint64_t skip = 0;  // bytes of a whole-file answer before `begin`
    std::optional<uint64_t> total;
    bool ranges_ignored = false;
    bool enough = false;  // the transfer was cut because [begin, end) is in
    uint64_t received = 0;
    std::string error;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* r = static_cast<RangeRead*>(user);
    const std::string line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) r->content_range.clear();
    const auto colon = line.find(':');
    if (colon == std::string::npos) return size * n;
    std::string key = line.substr(0, colon);
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (key == "content-range") {
        std::string value = line.substr(colon + 1);
        while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
        value.erase(0, value.find_first_not_of(" \t"));
        r->content_range = value;
    }
    return size * n;
}

// At the first body byte: where the body starts in the file, and the file's
// size.
bool check_answer(RangeRead* r) {
    long code = 0;
    curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code == 206) {
        unsigned long long start = 0, last = 0, total = 0;
        int used = 0;
        if (std::sscanf(r->content_range.c_str(), "bytes %llu-%llu/%llu%n", &start, &last, &total, &used) != 3 ||
            size_t(used) != r->content_range.size() || last < start || last >= total) {
            r->error = "a partial answer without a usable Content-Range ('" + r->content_range + "')";
            return false;
        }
        if (start != r->begin) {
            r->error = "Content-Range '" + r->content_range + "' does not start at byte " + std::to_string(r->begin);
            return false;
        }
        r->total = total;
        return true;
    }
    // 200: the server ignores Range and sends the file from byte 0; its length is
    // the file's.
    curl_off_t length = -1;
    curl_easy_getinfo(r->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    if (length < 0) {
        r->error =
            "the server ignores Range requests and sends no Content-Length, "
            "so the file's size is unknown";
        return false;
    }
    r->total = uint64_t(length);
    r->ranges_ignored = true;
    r->skip = r->begin;
    return true;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* r = static_cast<RangeRead*>(user);
    const size_t bytes = size * n;
    if (!r->checked) {
        r->checked = true;
        if (!check_answer(r)) return 0;
    }
    r->received += bytes;
    size_t from = 0;
    if (r->skip > 0) {
        from = size_t(std::min<uint64_t>(r->skip, bytes));
        r->skip -= from;
    }
    const uint64_t want = r->end - r->begin - r->out->size();
    const size_t take = size_t(std::min<uint64_t>(want, bytes - from));
    r->out->insert(r->out->end(), data + from, data + from + take);
    if (r->out->size() == r->end - r->begin) {
        r->enough = true;  // more than asked for (a server that ignores the range's
                           // end): cut here
        return take + from == bytes ? bytes : 0;
    }
    return bytes;
}

// GET `url` bytes [begin, end) (fewer at the end of the file) into `out`.
RangeRead fetch_range(const std::string& url, uint64_t begin, uint64_t end, std::vector<uint8_t>& out) {
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), &curl_easy_cleanup);
    if (!curl) throw std::runtime_error("libcurl failed to initialise");
    RangeRead r;
    r.curl = curl.get();
    r.begin = begin;
    r.end = end;
    r.out = &out;
    char errbuf[CURL_ERROR_SIZE] = {0};
    CURL* c = curl.get();
    const std::string range = std::to_string(begin) + "-" + std::to_string(end - 1);
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
    set_transfer_defaults(c, errbuf);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    const CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (!r.error.empty()) throw std::runtime_error(url + ": " + r.error);
    if (r.enough) return r;
    if (rc == CURLE_HTTP_RETURNED_ERROR && code == 416)
        throw std::runtime_error(url + ": the file is empty (HTTP 416)");
    if (rc == CURLE_HTTP_RETURNED_ERROR)
        throw std::runtime_error(url + ": server answered HTTP " + std::to_string(code));
    if (rc != CURLE_OK) throw std::runtime_error(url + ": " + (errbuf[0] ? errbuf : curl_easy_strerror(rc)));
    if (!r.checked) throw std::runtime_error(url + ": the server sent an empty answer to a range request");
    if (r.begin + out.size() < std::min(end, *r.total))
        throw std::runtime_error(url + ": the answer ended after " + std::to_string(out.size()) + " of the " +
                                 std::to_string(std::min(end, *r.total) - begin) + " bytes asked for");
    return r;
}

}  // namespace

RemoteHeader read_remote_gguf_header(const std::string& url) {
    struct CurlGlobal {
        CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
        ~CurlGlobal() { curl_global_cleanup(); }
    };
    static CurlGlobal global;
    RemoteHeader result;
    std::vector<uint8_t> prefix;
    std::optional<uint64_t> total;
    uint64_t want = kFirstRead;
    while (true) {
        std::vector<uint8_t> part;
        const RangeRead r = fetch_range(url, prefix.size(), total ? std::min(want, *total) : want, part);
        ++result.requests;
        result.bytes_received += r.received;
        result.ranges_ignored = result.ranges_ignored || r.ranges_ignored;
        if (total && r.total != total)
            throw std::runtime_error(url + ": the file's size changed between requests (" + std::to_string(*total) +
                                     " then " + std::to_string(*r.total) + " bytes)");
        total = r.total;
        prefix.insert(prefix.end(), part.begin(), part.end());
        try {
            result.file = std::make_shared<GgufFile>(GgufFile::parse_header(prefix, *total, url));
            return result;
        } catch (const GgufNeedMore& e) {
            // The prefix ends inside the header (so inside the file): read at least
            // twice as much.
            want = std::max<uint64_t>(e.needed, 2 * prefix.size());
            if (e.needed > kMaxRemoteHeader)
                throw GgufError(std::string(e.what()) + "; the header is larger than the " +
                                std::to_string(kMaxRemoteHeader >> 20) + " MiB read to plan a model");
            want = std::min(want, kMaxRemoteHeader);
        }
    }
}

}  // namespace deskside::models::store
