#include "server/tokenizer_handlers.h"

#include "server/api_error.h"
#include "server/openai_handlers.h"

namespace deskside::server {
namespace {

using nlohmann::ordered_json;

bool bool_field(const nlohmann::json& v, const std::string& name) {
    if (!v.is_boolean()) throw invalid_param(name, "'" + name + "' must be a boolean");
    return v.get<bool>();
}

ordered_json token_text_or_null(const models::Tokenizer& tok, std::optional<int32_t> id) {
    return id ? ordered_json(tok.token_text(*id)) : ordered_json(nullptr);
}

}  // namespace

void handle_tokenize(const httplib::Request& req, httplib::Response& res, const ServedModel& m) {
    const nlohmann::json body = parse_body(req);
    if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
    // vLLM's shape names the text "prompt" and, like its Hugging Face tokenizers, always reads
    // special tokens written in the text as such (an "<bos>" in the text is the BOS token).
    const bool vllm = body.contains("prompt");
    const std::string text_field = vllm ? "prompt" : "content";
    bool add_special = vllm;  // vLLM's default is true, llama.cpp's false
    bool parse_special = vllm;
    std::optional<std::string> text;
    for (const auto& [k, v] : body.items()) {
        if (k == text_field) {
            if (!v.is_string()) throw invalid_param(k, "'" + k + "' must be a string");
            text = v.get<std::string>();
        } else if (!vllm && k == "add_special") {
            add_special = bool_field(v, k);
        } else if (!vllm && k == "parse_special") {
            parse_special = bool_field(v, k);
        } else if (vllm && k == "add_special_tokens") {
            add_special = bool_field(v, k);
        } else if (vllm && k == "model") {
            if (!v.is_string() || v.get<std::string>() != m.id)
                throw ApiError(404, "The model '" + v.dump() + "' does not exist; this server serves '" + m.id + "'", "model",
                               "model_not_found");
        } else {
            throw invalid_param(k, "unknown field '" + k + "'");
        }
    }
    if (!text) throw ApiError(400, "'content' (or 'prompt') is required", "content", "missing_required_parameter");
    const std::vector<int32_t> tokens = m.tokenizer->encode(*text, add_special, parse_special);
    if (vllm)
        res.set_content(dump({{"count", tokens.size()}, {"max_model_len", m.n_ctx}, {"tokens", tokens}}), "application/json");
    else
        res.set_content(dump({{"tokens", tokens}}), "application/json");
}

void handle_detokenize(const httplib::Request& req, httplib::Response& res, const ServedModel& m) {
    const nlohmann::json body = parse_body(req);
    if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
        throw ApiError(400, "'tokens' (an array of token ids) is required", "tokens", "missing_required_parameter");
    for (const auto& [k, v] : body.items())
        if (k != "tokens" && k != "model") throw invalid_param(k, "unknown field '" + k + "'");
    std::vector<int32_t> ids;
    for (size_t i = 0; i < body["tokens"].size(); ++i) {
        const auto& v = body["tokens"][i];
        const std::string p = "tokens[" + std::to_string(i) + "]";
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= m.tokenizer->n_vocab())
            throw invalid_param(p, "'" + p + "' is not a token id of this model");
        ids.push_back(v.get<int32_t>());
    }
    const std::string text = m.tokenizer->decode(ids);
    res.set_content(dump({{"content", text}, {"prompt", text}}), "application/json");
}

void handle_tokenizer_info(httplib::Response& res, const ServedModel& m) {
    const models::Tokenizer& tok = *m.tokenizer;
    res.set_content(dump({{"tokenizer_class", "deskside"},
                          {"bos_token", token_text_or_null(tok, tok.bos())},
                          {"eos_token", token_text_or_null(tok, tok.eos())},
                          {"pad_token", nullptr},
                          {"add_bos_token", tok.add_bos()},
                          {"model_max_length", m.n_ctx},
                          {"vocab_size", tok.n_vocab()}}),
                    "application/json");
}

}  // namespace deskside::server
