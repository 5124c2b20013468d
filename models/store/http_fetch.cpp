#include "models/store/http_fetch.h"

#include <curl/curl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

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

// What identifies the file a partial download holds the beginning of: the first response's
// validators (a strong ETag, else Last-Modified), its size and the sha256 it published. Kept beside
// the partial so that a resume in a later run asks for the rest of that same file (If-Range) and
// still checks its digest.
struct Validators {
    std::string etag, last_modified;
    std::optional<uint64_t> size;
    std::optional<std::string> sha256;
    bool empty() const { return etag.empty() && last_modified.empty() && !size && !sha256; }
};

Validators load_validators(const std::string& path) {
    Validators v;
    std::ifstream in(path);
    if (!in) return v;
    // A file we cannot read back is as good as none: the resume then trusts the range check and
    // the digest alone.
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object()) return v;
    if (j.contains("etag") && j["etag"].is_string()) v.etag = j["etag"];
    if (j.contains("last_modified") && j["last_modified"].is_string()) v.last_modified = j["last_modified"];
    if (j.contains("size") && j["size"].is_number_unsigned()) v.size = j["size"].get<uint64_t>();
    if (j.contains("sha256") && j["sha256"].is_string()) v.sha256 = sha256_from_etag(j["sha256"]);
    return v;
}

void save_validators(const std::string& path, const Validators& v) {
    std::error_code ec;
    if (v.empty()) {
        fs::remove(path, ec);
        return;
    }
    nlohmann::json j = nlohmann::json::object();
    if (!v.etag.empty()) j["etag"] = v.etag;
    if (!v.last_modified.empty()) j["last_modified"] = v.last_modified;
    if (v.size) j["size"] = *v.size;
    if (v.sha256) j["sha256"] = *v.sha256;
    std::ofstream out(path, std::ios::trunc);
    out << j.dump() << "\n";
    out.close();
    if (!out) throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
}

// Bytes an unprivileged process may still write on the file system holding `dir`.
std::optional<uint64_t> free_disk_bytes(const std::string& dir) {
    struct statvfs st {};
    if (statvfs(dir.c_str(), &st) != 0) return std::nullopt;
    return uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
}

// "bytes START-END/TOTAL" (TOTAL may be "*"): START, END and TOTAL (0 when unknown).
struct ContentRange {
    uint64_t start = 0, end = 0, total = 0;
};
std::optional<ContentRange> parse_content_range(const std::string& value) {
    ContentRange r;
    char total[32] = {0};
    unsigned long long start = 0, end = 0;
    int used = 0;
    if (std::sscanf(value.c_str(), "bytes %llu-%llu/%31[0-9*]%n", &start, &end, total, &used) != 3 ||
        size_t(used) != value.size() || end < start) {
        return std::nullopt;
    }
    r.start = start;
    r.end = end;
    r.total = total[0] == '*' ? 0 : std::strtoull(total, nullptr, 10);
    return r;
}

// State of one attempt, shared with libcurl's callbacks.
struct Transfer {
    CURL* curl = nullptr;
    FILE* out = nullptr;
    const DownloadRequest* req = nullptr;
    Sha256* hash = nullptr;
    Validators* validators = nullptr;  // of the file the partial holds; replaced when it starts over
    uint64_t offset = 0;   // bytes on disk when this attempt started
    uint64_t written = 0;  // bytes on disk now
    bool status_checked = false;
    bool restarted = false;  // the partial was truncated: the body is the file from byte 0
    std::string start_over;  // why the body cannot continue the partial (the next attempt starts from 0)
    std::string write_error;
    std::optional<std::string> linked_etag;
    // Of the last response (a redirect's headers come first, then the file's).
    std::string etag, last_modified, content_range;
    std::optional<uint64_t> total;
    std::optional<Progress> progress;
    bool cancelled = false;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::string line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect): its own headers follow
        t->etag.clear();
        t->last_modified.clear();
        t->content_range.clear();
        return size * n;
    }
    const auto colon = line.find(':');
    if (colon == std::string::npos) return size * n;
    const std::string key = lower(trim(line.substr(0, colon)));
    const std::string value = trim(line.substr(colon + 1));
    // Redirect responses carry the digest on Hugging Face; keep the first one seen.
    if (key == "x-linked-etag" && !t->linked_etag) t->linked_etag = sha256_from_etag(value);
    if (key == "etag") t->etag = value;
    if (key == "last-modified") t->last_modified = value;
    if (key == "content-range") t->content_range = value;
    return size * n;
}

// Empties the partial so that the body being received is the file from its first byte.
bool truncate_partial(Transfer* t) {
    if (std::fflush(t->out) != 0 || ftruncate(fileno(t->out), 0) != 0 || std::fseek(t->out, 0, SEEK_SET) != 0) {
        t->write_error = std::string("cannot truncate the partial file: ") + std::strerror(errno);
        return false;
    }
    *t->hash = Sha256();
    t->offset = t->written = 0;
    t->restarted = true;
    return true;
}

// Why a response to `Range: bytes=OFFSET-` cannot continue the partial, or "" when it can.
std::string resume_mismatch(const Transfer& t, const std::optional<ContentRange>& range) {
    const Validators& v = *t.validators;
    if (!range) return "a partial response without a valid Content-Range ('" + t.content_range + "')";
    if (range->start != t.offset) {
        return "Content-Range '" + t.content_range + "' does not start at byte " + std::to_string(t.offset);
    }
    if (!v.etag.empty() && !t.etag.empty() && t.etag != v.etag) return "the ETag changed";
    if (!v.last_modified.empty() && !t.last_modified.empty() && t.last_modified != v.last_modified) {
        return "Last-Modified changed";
    }
    if (v.size && range->total && range->total != *v.size) return "the file's size changed";
    if (v.sha256 && t.linked_etag && *t.linked_etag != *v.sha256) return "the published sha256 changed";
    return "";
}

// Decides, at the first byte of the body, whether it continues the partial, replaces it, or
// cannot be used; checks the room left; records the validators of a file started from byte 0.
bool check_response(Transfer* t) {
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    const std::optional<ContentRange> range = parse_content_range(t->content_range);
    if (t->offset > 0 && code == 200) {
        // No range support, or If-Range said the file changed: start over rather than append.
        if (!truncate_partial(t)) return false;
    } else if (t->offset > 0) {
        const std::string why = resume_mismatch(*t, range);
        if (!why.empty() && range && range->start == 0) {
            if (!truncate_partial(t)) return false;  // the whole file after all: take it from here
        } else if (!why.empty()) {
            t->start_over = why;
            return false;
        } else if (!t->validators->sha256) {
            t->validators->sha256 = t->linked_etag ? t->linked_etag : sha256_from_etag(t->etag);
        }
    }
    curl_off_t length = -1;
    curl_easy_getinfo(t->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    if (length >= 0) t->total = t->offset + uint64_t(length);
    if (t->total && t->req->room && *t->total - t->offset > *t->req->room) {
        t->write_error = "no space in the store: the download needs " + std::to_string(*t->total - t->offset) +
                         " more bytes, " + std::to_string(*t->req->room) + " left under DESKSIDE_STORE_MAX_BYTES";
        return false;
    }
    const std::string dir = fs::path(t->req->partial_path).parent_path().string();
    if (const auto free = free_disk_bytes(dir); t->total && free && *t->total - t->offset > *free) {
        t->write_error = "not enough free disk space in " + dir + ": the download needs " +
                         std::to_string(*t->total - t->offset) + " more bytes, " + std::to_string(*free) + " are free";
        return false;
    }
    if (t->offset == 0) {
        // Weak ETags cannot ask for a range (RFC 9110, 13.1.5): keep Last-Modified alone then.
        Validators v;
        if (t->etag.rfind("W/", 0) != 0) v.etag = t->etag;
        v.last_modified = t->last_modified;
        v.size = t->total;
        v.sha256 = t->linked_etag ? t->linked_etag : sha256_from_etag(t->etag);
        *t->validators = v;
        try {
            save_validators(validators_path(t->req->partial_path), v);
        } catch (const std::exception& e) {
            t->write_error = e.what();
            return false;
        }
    }
    t->progress.emplace(t->req->label, t->offset, t->total);
    return true;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = size * n;
    if (!t->status_checked) {
        t->status_checked = true;
        if (!check_response(t)) return 0;
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

enum class Outcome { Done, Dropped, StartOver };

// One HTTP request continuing the partial file. Returns Dropped when the connection broke in a
// way worth retrying, StartOver (with `why`) when the answer cannot continue the partial; throws
// for everything else.
Outcome attempt(const DownloadRequest& req, Sha256& hash, uint64_t& on_disk, Validators& validators, bool& restarted,
                std::string& why) {
    std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(req.partial_path.c_str(), "ab"), &std::fclose);
    if (!out) throw std::runtime_error(req.partial_path + ": cannot open for writing: " + std::strerror(errno));
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), &curl_easy_cleanup);
    if (!curl) throw std::runtime_error("libcurl failed to initialise");
    Transfer t;
    t.curl = curl.get();
    t.out = out.get();
    t.req = &req;
    t.hash = &hash;
    t.validators = &validators;
    t.offset = t.written = on_disk;
    char errbuf[CURL_ERROR_SIZE] = {0};
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
    set_transfer_defaults(c, errbuf);  // a transfer stuck for a minute counts as dropped and is resumed
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
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(nullptr, &curl_slist_free_all);
    if (on_disk > 0) {
        curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
        // The rest of the same file only: a server that honours If-Range sends the whole new file
        // (200) when it changed since the partial began.
        const std::string& validator = validators.etag.empty() ? validators.last_modified : validators.etag;
        const bool printable = std::all_of(validator.begin(), validator.end(),
                                           [](unsigned char ch) { return ch >= 0x20 && ch != 0x7f; });
        if (!validator.empty() && printable) {
            headers.reset(curl_slist_append(nullptr, ("If-Range: " + validator).c_str()));
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
        }
    }
    const CURLcode rc = curl_easy_perform(c);
    const bool flushed = std::fflush(out.get()) == 0;
    on_disk = t.written;
    restarted = t.restarted;
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (t.cancelled) throw Interrupted("interrupted after " + std::to_string(on_disk) + " bytes");
    if (!t.start_over.empty()) {
        why = t.start_over;
        return Outcome::StartOver;
    }
    if (!t.write_error.empty()) throw std::runtime_error(req.partial_path + ": " + t.write_error);
    if (!flushed) throw std::runtime_error(req.partial_path + ": cannot write the partial file: " + std::strerror(errno));
    if (rc == CURLE_OK) {
        if (!t.status_checked && !check_response(&t)) {  // an empty body: on_body never ran
            if (!t.start_over.empty()) {
                why = t.start_over;
                return Outcome::StartOver;
            }
            throw std::runtime_error(req.partial_path + ": " + t.write_error);
        }
        if (t.progress) t.progress->finish(on_disk);
        return Outcome::Done;
    }
    if (rc == CURLE_HTTP_RETURNED_ERROR && code == 416 && on_disk > 0) {
        // Range past the end: the partial already holds the whole file (a run stopped after the
        // last byte but before the move), unless the server says the file is another size. The
        // digest check decides whether it is good.
        unsigned long long size = 0;
        int used = 0;
        if (std::sscanf(t.content_range.c_str(), "bytes */%llu%n", &size, &used) == 1 &&
            size_t(used) == t.content_range.size() && size != on_disk) {
            why = "the file is " + std::to_string(size) + " bytes, the partial " + std::to_string(on_disk);
            return Outcome::StartOver;
        }
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

std::string validators_path(const std::string& partial_path) { return partial_path + ".validators"; }

void remove_partial(const std::string& partial_path) {
    std::error_code ec;
    fs::remove(partial_path, ec);
    fs::remove(validators_path(partial_path), ec);
}

void set_transfer_defaults(CURL* c, char* errbuf) {
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "deskside-pull/0.1");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
}

DownloadResult download(const DownloadRequest& req) {
    static CurlGlobal global;
    fs::create_directories(fs::path(req.partial_path).parent_path());
    Sha256 hash;
    uint64_t on_disk = hash_existing(req.partial_path, hash);
    Validators validators = on_disk > 0 ? load_validators(validators_path(req.partial_path)) : Validators{};
    if (on_disk > 0) std::fprintf(stderr, "resuming %s at %s\n", req.label.c_str(), human_bytes(double(on_disk)).c_str());
    DownloadResult result;
    result.resumed = on_disk > 0;
    // Starting over is bounded apart from the retries: a server that keeps changing the file (or
    // answering ranges wrongly) fails the pull instead of looping.
    int starts_over = 0;
    for (int tries = 0;; ++tries) {
        std::string why;
        Outcome outcome;
        bool restarted = false;
        try {
            outcome = attempt(req, hash, on_disk, validators, restarted, why);
        } catch (...) {
            // An empty partial (nothing arrived: 404, no connection) only clutters the store.
            std::error_code ec;
            if (!fs::exists(req.partial_path, ec) || fs::file_size(req.partial_path, ec) == 0)
                remove_partial(req.partial_path);
            throw;
        }
        if (restarted) result.resumed = false;
        if (outcome == Outcome::Done) break;
        if (outcome == Outcome::StartOver) {
            if (++starts_over > 2) {
                remove_partial(req.partial_path);
                throw std::runtime_error(req.url + ": the server's answers to a range request cannot continue the "
                                         "download (" + why + "), even after starting over");
            }
            std::fprintf(stderr, "%s: %s; downloading it again from the start\n", req.label.c_str(), why.c_str());
            remove_partial(req.partial_path);
            hash = Sha256();
            on_disk = 0;
            validators = Validators{};
            result.resumed = false;
            --tries;
            continue;
        }
        if (tries >= req.retries) {
            throw std::runtime_error(req.url + ": connection dropped after " + std::to_string(on_disk) + " bytes (" + why +
                                     "); the partial download is kept in " + req.partial_path +
                                     ", run the same pull again to resume it");
        }
        result.resumed = result.resumed || on_disk > 0;
        std::fprintf(stderr, "connection dropped after %s (%s); resuming\n", human_bytes(double(on_disk)).c_str(), why.c_str());
    }
    result.size = on_disk;
    result.sha256 = hash.hex_digest();
    result.published_sha256 = validators.sha256;
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
    // HF_ENDPOINT, which huggingface_hub reads too, points hf:// at a mirror (or a test's server).
    std::string endpoint = "https://huggingface.co";
    if (const char* env = std::getenv("HF_ENDPOINT"); env && *env) {
        endpoint = env;
        while (endpoint.size() > 1 && endpoint.back() == '/') endpoint.pop_back();
        if (endpoint.rfind("https://", 0) != 0 && endpoint.rfind("http://", 0) != 0)
            throw std::invalid_argument("HF_ENDPOINT='" + endpoint + "': expected an http(s):// URL");
    }
    return endpoint + "/" + rest.substr(0, second) + "/resolve/main/" + rest.substr(second + 1);
}

std::optional<std::string> sha256_from_etag(std::string value) {
    value = trim(value);
    if (value.rfind("W/", 0) == 0) value = value.substr(2);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (!is_sha256_hex(value)) return std::nullopt;
    return lower(value);
}

}  // namespace deskside::models::store
