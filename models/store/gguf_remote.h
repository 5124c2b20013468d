// The header of a GGUF file on a web server, read with HTTP Range requests: the
// metadata and the tensor table, never the tensor data, so `deskside fits` and
// `deskside pull` can plan a model's placement before (or instead of)
// downloading gigabytes.
//
// The prefix fetched grows until the header parses: 256 KiB first, then at
// least double, or as far as the parser says it needs. A server that ignores
// Range (answers 200 with the whole file) is read from the start of that answer
// and the transfer cut once the prefix is in, so the bytes taken stay bounded
// either way. Redirects are followed (Hugging Face's resolve URLs redirect to a
// CDN), over http and https only, with libcurl's certificate checks as `pull`
// has them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "models/gguf.h"

namespace deskside::models::store {

struct RemoteHeader {
    std::shared_ptr<const GgufFile> file;  // header and tensor infos only (no tensor data)
    uint64_t bytes_received = 0;           // body bytes taken from the server, all requests together
    int requests = 0;
    bool ranges_ignored = false;  // the server answered a range with the whole file (200)
};

// The largest header read (bytes from the start of the file); a bigger one is
// refused. Real headers are a few MiB (a 256k-token vocabulary with its merges
// is about 20 MiB); the parsed metadata takes several times its bytes in
// memory, so a hostile server must not get far beyond.
constexpr uint64_t kMaxRemoteHeader = uint64_t{64} << 20;

// Throws GgufError for a file that is not GGUF or whose header is malformed or
// larger than kMaxRemoteHeader (the message names the URL, the field and the
// offset), std::runtime_error for HTTP and transfer errors (the URL and the
// status).
RemoteHeader read_remote_gguf_header(const std::string& url);

}  // namespace deskside::models::store
