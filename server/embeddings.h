// POST /v1/embeddings: OpenAI's request (input as a string, strings, token ids or lists of them;
// encoding_format float or base64; dimensions; user) turned into token lists, and the pooled
// vectors back into OpenAI's response. Private to server/.
//
// Each input is one embedding job of the engine loop (JobSpec::embed, pooled as the server was
// started: ServedModel::pooling): they queue with generation and share its KV cache.
#pragma once

#include <string>
#include <vector>

#include <httplib.h>

#include "server/http_server.h"

namespace deskside::server {

void handle_embeddings(const httplib::Request& req, httplib::Response& res, const ServedModel& model);

// The bytes of `v` as little-endian float32, base64-encoded (RFC 4648 with padding): what OpenAI
// returns for encoding_format "base64".
std::string base64_floats(const std::vector<float>& v);

}  // namespace deskside::server
