// Streams an HTTP(S) URL into a partial file with libcurl: follows redirects, resumes an existing
// partial with a Range request, hashes while writing, and reads the sha256 a server publishes
// (Hugging Face sends it as X-Linked-ETag on the redirect for LFS files, or as the ETag).
//
// A resume continues the same file or none: the first response's ETag / Last-Modified, size and
// published sha256 are kept beside the partial (PARTIAL.validators) and sent as If-Range; an answer
// that cannot continue the partial (200 to the range, a Content-Range not starting at the offset
// asked for, other validators) starts the download over from byte 0. The free disk space is
// checked against Content-Length before the first byte is written.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace deskside::models::store {

// The transfer stopped because the caller's cancel flag was raised (Ctrl-C); the partial is kept.
class Interrupted : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

struct DownloadRequest {
    std::string url;
    std::string partial_path;            // created or continued
    std::optional<uint64_t> room;        // most bytes the partial may add (store size limit)
    const std::atomic<bool>* cancel = nullptr;
    int retries = 3;                     // further attempts after a dropped connection, each resuming
    std::string label;                   // shown in the progress line
};

struct DownloadResult {
    uint64_t size = 0;
    std::string sha256;                           // of the complete file
    std::optional<std::string> published_sha256;  // what the server said it should be
    bool resumed = false;  // part of the file came from an earlier request (or an earlier run)
};

// Throws std::runtime_error naming the URL and the HTTP status or transfer error; the partial
// file stays for the next attempt except when the server answered with an error status.
DownloadResult download(const DownloadRequest& req);

// The options every transfer of the store sets: http and https only (redirects too, at most 10),
// an HTTP error status fails the transfer, 30 s to connect, below 1 byte/s for a minute is a drop,
// and libcurl's message goes to `errbuf` (CURL_ERROR_SIZE bytes).
void set_transfer_defaults(CURL* curl, char* errbuf);

// Where the validators of a partial download are kept, and the removal of both.
std::string validators_path(const std::string& partial_path);
void remove_partial(const std::string& partial_path);

// hf://ORG/REPO/PATH/FILE.gguf -> https://huggingface.co/ORG/REPO/resolve/main/PATH/FILE.gguf
// ($HF_ENDPOINT in place of https://huggingface.co when set, as huggingface_hub does).
// Throws std::invalid_argument for a malformed hf:// source.
std::string hf_url(const std::string& source);

// The 64-hex-digit sha256 inside an ETag header value ("abc...", W/"abc..."), lower-cased.
std::optional<std::string> sha256_from_etag(std::string value);

}  // namespace deskside::models::store
