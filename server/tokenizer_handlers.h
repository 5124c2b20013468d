// The tokenizer routes, in the two shapes clients use:
// - llama.cpp's: POST /tokenize {"content", "add_special", "parse_special"} -> {"tokens"};
//   POST /detokenize {"tokens"} -> {"content"}.
// - vLLM's, which lm-evaluation-harness's `remote` tokenizer backend speaks (its
//   local-completions model picks it on its own when GET /tokenizer_info answers):
//   POST /tokenize {"prompt", "add_special_tokens", "model"} -> {"count", "max_model_len",
//   "tokens"}; POST /detokenize {"tokens"} -> {"prompt"}; GET /tokenizer_info -> the special
//   tokens' texts and the context length.
// /detokenize answers both "content" and "prompt"; the body's fields pick the /tokenize shape.
#pragma once

#include <httplib.h>

#include "server/http_server.h"

namespace deskside::server {

void handle_tokenize(const httplib::Request& req, httplib::Response& res, const ServedModel& m);
void handle_detokenize(const httplib::Request& req, httplib::Response& res, const ServedModel& m);
void handle_tokenizer_info(httplib::Response& res, const ServedModel& m);

}  // namespace deskside::server
