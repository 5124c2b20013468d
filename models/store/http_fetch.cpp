#include "models/store/http_fetch.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "models/store/progress.h"
#include "models/store/sha256.h"

namespace deskside::models::store {

namespace fs = std::filesystem;

namespace {

struct CurlGlobal {
    CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
    ~CurlGlobal() { curl_global_cleanup(); }
};

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t i = 0;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(i);
}

// State of one attempt, shared with libcurl's callbacks.
struct Transfer {
    CURL* curl = nullptr;
    FILE* out = nullptr;
    const DownloadRequest* req = nullptr;
    Sha256* hash = nullptr;
    uint64_t offset = 0;   // bytes on disk when this attempt started
    uint64_t written = 0;  // bytes on disk now
    bool status_checked = false;
    bool restarted = false;       // the server ignored our Range: the partial was truncated
    std::string write_error;
    std::optional<std::string> linked_etag, etag;
    std::optional<uint64_t> total;
    std::optional<Progress> progress;
    bool cancelled = false;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::string line(data, size * n);
    const auto colon = line.find(':');
    if (colon == std::string::npos) return size * n;
    const std::string key = lower(trim(line.substr(0, colon)));
    const std::string value = trim(line.substr(colon + 1));
    // Redirect responses carry the digest on Hugging Face; keep the first one seen.
    if (key == "x-linked-etag" && !t->linked_etag) t->linked_etag = sha256_from_etag(value);
    if (key == "etag" && !t->etag) t->etag = sha256_from_etag(value);
    return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = size * n;
    if (!t->status_checked) {
        t->status_checked = true;
        long code = 0;
        curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
        if (code == 200 && t->offset > 0) {
            // No range support: start over rather than append a second copy.
            if (std::fflush(t->out) != 0 || ftruncate(fileno(t->out), 0) != 0 || std::fseek(t->out, 0, SEEK_SET) != 0) {
                t->write_error = std::string("cannot truncate the partial file: ") + std::strerror(errno);
                return 0;
            }
            *t->hash = Sha256();
            t->offset = t->written = 0;
            t->restarted = true;
        }
        curl_off_t length = -1;
        curl_easy_getinfo(t->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
        if (length >= 0) t->total = t->offset + uint64_t(length);
        if (t->total && t->req->room && *t->total - t->offset > *t->req->room) {
            t->write_error = "no space in the store: the download needs " + std::to_string(*t->total - t->offset) +
                             " more bytes, " + std::to_string(*t->req->room) + " left under DESKSIDE_STORE_MAX_BYTES";
            return 0;
        }
        t->progress.emplace(t->req->label, t->offset, t->total);
    }
    if (t->req->room && t->written + bytes - t->offset > *t->req->room) {
        t->write_error = "no space in the store: more than " + std::to_string(*t->req->room) +
                         " bytes left under DESKSIDE_STORE_MAX_BYTES";
        return 0;
    }
    if (std::fwrite(data, 1, bytes, t->out) != bytes) {
        t->write_error = std::string("cannot write the partial file: ") + std::strerror(errno);
        return 0;
    }
    t->hash->update(data, bytes);
    t->written += bytes;
    return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(user);
    if (t->req->cancel && t->req->cancel->load()) {
        t->cancelled = true;
        return 1;  // aborts the transfer
    }
    if (t->progress) t->progress->update(t->written);
    return 0;
}

// Hashes what is already in the partial file, so a resumed download still yields the digest of
// the whole file.
uint64_t hash_existing(const std::string& path, Sha256& hash) {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) return 0;
    std::vector<char> buf(1 << 20);
    uint64_t total = 0;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
        hash.update(buf.data(), n);
        total += n;
    }
    return total;
}

enum class Outcome { Done, Dropped };

// One HTTP request continuing the partial file. Returns Dropped when the connection broke in a
// way worth retrying; throws for everything else.
Outcome attempt(const DownloadRequest& req, Sha256& hash, uint64_t& on_disk, DownloadResult& result, std::string& why) {
    std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(req.partial_path.c_str(), "ab"), &std::fclose);
    if (!out) throw std::runtime_error(req.partial_path + ": cannot open for writing: " + std::strerror(errno));
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), &curl_easy_cleanup);
    if (!curl) throw std::runtime_error("libcurl failed to initialise");
    Transfer t;
    t.curl = curl.get();
    t.out = out.get();
    t.req = &req;
    t.hash = &hash;
    t.offset = t.written = on_disk;
    char errbuf[CURL_ERROR_SIZE] = {0};
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "deskside-pull/0.1");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    // A transfer stuck below 1 byte/s for a minute counts as dropped and is resumed.
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
    // CURLOPT_RANGE rather than RESUME_FROM: a server that ignores ranges answers 200 and on_body
    // starts over, where RESUME_FROM would fail the transfer.
    const std::string range = std::to_string(on_disk) + "-";
    if (on_disk > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
    const CURLcode rc = curl_easy_perform(c);
    const bool flushed = std::fflush(out.get()) == 0;
    on_disk = t.written;
    if (t.linked_etag) result.published_sha256 = t.linked_etag;
    else if (t.etag && !result.published_sha256) result.published_sha256 = t.etag;
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (t.cancelled) throw Interrupted("interrupted after " + std::to_string(on_disk) + " bytes");
    if (!t.write_error.empty()) throw std::runtime_error(req.partial_path + ": " + t.write_error);
    if (!flushed) throw std::runtime_error(req.partial_path + ": cannot write the partial file: " + std::strerror(errno));
    if (rc == CURLE_OK) {
        if (t.progress) t.progress->finish(on_disk);
        return Outcome::Done;
    }
    if (rc == CURLE_HTTP_RETURNED_ERROR && code == 416 && on_disk > 0) {
        // Range past the end: the partial already holds the whole file (a run stopped after the
        // last byte but before the move). The digest check below decides whether it is good.
        return Outcome::Done;
    }
    if (rc == CURLE_HTTP_RETURNED_ERROR) {
        throw std::runtime_error(req.url + ": server answered HTTP " + std::to_string(code));
    }
    why = std::string(errbuf[0] ? errbuf : curl_easy_strerror(rc));
    switch (rc) {
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_GOT_NOTHING:
        case CURLE_SEND_ERROR:
            return Outcome::Dropped;
        default:
            throw std::runtime_error(req.url + ": " + why);
    }
}

}  // namespace

DownloadResult download(const DownloadRequest& req) {
    static CurlGlobal global;
    fs::create_directories(fs::path(req.partial_path).parent_path());
    Sha256 hash;
    uint64_t on_disk = hash_existing(req.partial_path, hash);
    if (on_disk > 0) std::fprintf(stderr, "resuming %s at %s\n", req.label.c_str(), human_bytes(double(on_disk)).c_str());
    DownloadResult result;
    for (int tries = 0;; ++tries) {
        std::string why;
        Outcome outcome;
        try {
            outcome = attempt(req, hash, on_disk, result, why);
        } catch (...) {
            // An empty partial (nothing arrived: 404, no connection) only clutters the store.
            std::error_code ec;
            if (fs::exists(req.partial_path, ec) && fs::file_size(req.partial_path, ec) == 0) fs::remove(req.partial_path, ec);
            throw;
        }
        if (outcome == Outcome::Done) break;
        if (tries >= req.retries) {
            throw std::runtime_error(req.url + ": connection dropped after " + std::to_string(on_disk) + " bytes (" + why +
                                     "); the partial download is kept in " + req.partial_path +
                                     ", run the same pull again to resume it");
        }
        std::fprintf(stderr, "connection dropped after %s (%s); resuming\n", human_bytes(double(on_disk)).c_str(), why.c_str());
    }
    result.size = on_disk;
    result.sha256 = hash.hex_digest();
    return result;
}

std::string hf_url(const std::string& source) {
    constexpr std::string_view kScheme = "hf://";
    if (source.rfind(kScheme, 0) != 0) throw std::invalid_argument("not an hf:// source: '" + source + "'");
    const std::string rest = source.substr(kScheme.size());
    const auto first = rest.find('/');
    const auto second = first == std::string::npos ? std::string::npos : rest.find('/', first + 1);
    if (first == 0 || second == std::string::npos || second == first + 1 || second + 1 >= rest.size() ||
        rest.find("..") != std::string::npos || rest.back() == '/') {
        throw std::invalid_argument("malformed source '" + source + "': expected hf://ORG/REPO/FILE.gguf");
    }
    return "https://huggingface.co/" + rest.substr(0, second) + "/resolve/main/" + rest.substr(second + 1);
}

std::optional<std::string> sha256_from_etag(std::string value) {
    value = trim(value);
    if (value.rfind("W/", 0) == 0) value = value.substr(2);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (!is_sha256_hex(value)) return std::nullopt;
    return lower(value);
}

}  // namespace deskside::models::store
