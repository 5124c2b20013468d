#include "server/embeddings.h"

#include <algorithm>
#include <bit>
#include <optional>

#include "server/api_error.h"
#include "server/openai_handlers.h"

namespace deskside::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// OpenAI's own limit on inputs per request.
constexpr size_t kMaxInputs = 2048;

struct EmbeddingRequest {
    std::string model;
    std::vector<std::vector<int32_t>> inputs;
    bool base64 = false;
    std::optional<int64_t> dimensions;
};

std::vector<int32_t> token_ids(const json& v, const std::string& param, const models::Tokenizer& tok) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = param + "[" + std::to_string(i) + "]";
        if (!v[i].is_number_integer()) throw wrong_type(p, "a token id (an integer)");
        const int64_t id = v[i].get<int64_t>();
        if (id < 0 || id >= tok.n_vocab())
            throw invalid_param(p, "token id " + std::to_string(id) + " is outside the vocabulary (" +
                                       std::to_string(tok.n_vocab()) + " tokens)");
        ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
}

std::vector<int32_t> text_ids(const json& v, const std::string& param, const models::Tokenizer& tok) {
    const std::string text = v.get<std::string>();
    if (text.empty()) throw invalid_param(param, "'" + param + "' must not be empty");
    return tok.encode(text, true, false);
}

// input: "text" | ["text", ...] | [id, ...] | [[id, ...], ...].
std::vector<std::vector<int32_t>> parse_input(const json& v, const models::Tokenizer& tok) {
    if (v.is_string()) return {text_ids(v, "input", tok)};
    if (!v.is_array()) throw wrong_type("input", "a string, an array of strings, or an array of token ids");
    if (v.empty()) throw invalid_param("input", "'input' must not be empty");
    if (v.size() > kMaxInputs)
        throw invalid_param("input", "'input' takes at most " + std::to_string(kMaxInputs) + " items");
    if (v[0].is_number()) return {token_ids(v, "input", tok)};
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = "input[" + std::to_string(i) + "]";
        if (v[i].is_string()) {
            out.push_back(text_ids(v[i], p, tok));
        } else if (v[i].is_array()) {
            if (v[i].empty()) throw invalid_param(p, "'" + p + "' must not be empty");
            out.push_back(token_ids(v[i], p, tok));
        } else {
            throw wrong_type(p, "a string or an array of token ids");
        }
    }
    return out;
}

EmbeddingRequest parse_request(const json& body, const ServedModel& m) {
    if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_type");
    EmbeddingRequest r;
    bool has_input = false;
    for (const auto& [key, v] : body.items()) {
        if (v.is_null()) continue;
        if (key == "model") {
            if (!v.is_string()) throw wrong_type(key, "a string");
            r.model = v.get<std::string>();
        } else if (key == "input") {
            r.inputs = parse_input(v, *m.tokenizer);
            has_input = true;
        } else if (key == "encoding_format") {
            if (!v.is_string() || (v != "float" && v != "base64"))
                throw invalid_param(key, "'encoding_format' must be 'float' or 'base64'");
            r.base64 = v == "base64";
        } else if (key == "dimensions") {
            if (!v.is_number_integer()) throw wrong_type(key, "an integer");
            r.dimensions = v.get<int64_t>();
        } else if (key == "user") {
            if (!v.is_string()) throw wrong_type(key, "a string");
        } else {
            throw invalid_param(key, "unknown field '" + key + "'");
        }
    }
    if (r.model.empty()) throw ApiError(400, "'model' is required", "model", "missing_required_parameter");
    if (!has_input) throw ApiError(400, "'input' is required", "input", "missing_required_parameter");
    return r;
}

}  // namespace

std::string base64_floats(const std::vector<float>& v) {
    static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes(v.size() * sizeof(float), '\0');
    for (size_t i = 0; i < v.size(); ++i) {
        uint32_t u = std::bit_cast<uint32_t>(v[i]);
        for (size_t b = 0; b < 4; ++b, u >>= 8) bytes[i * 4 + b] = static_cast<char>(u & 0xff);  // little-endian
    }
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        const size_t n = std::min<size_t>(3, bytes.size() - i);
        uint32_t group = 0;
        for (size_t k = 0; k < 3; ++k) group = group << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
        for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 0x3f] : '=';
    }
    return out;
}

void handle_embeddings(const httplib::Request& req, httplib::Response& res, const ServedModel& m) {
    const EmbeddingRequest r = parse_request(parse_body(req), m);
    if (r.model != m.id)
        throw ApiError(404, "The model '" + r.model + "' does not exist; this server serves '" + m.id + "'", "model",
                       "model_not_found");
    if (m.pooling == engine::Pooling::Rank)
        throw ApiError(400,
                       "the model '" + m.id +
                           "' is a reranker (pooling_type rank): it has no embeddings; start the "
                           "server with --pooling mean|cls|last to embed with it anyway",
                       "model", "unsupported_model");
    // No GGUF file declares Matryoshka training, so a truncated vector would mean nothing.
    if (r.dimensions && *r.dimensions != m.n_embd)
        throw invalid_param("dimensions", "the model '" + m.id + "' does not support 'dimensions' other than its " +
                                              "embedding size " + std::to_string(m.n_embd));
    int64_t n_tokens = 0;
    for (size_t i = 0; i < r.inputs.size(); ++i) {
        const auto n = static_cast<int64_t>(r.inputs[i].size());
        if (n > m.n_ctx)
            throw ApiError(400,
                           "This model's maximum context length is " + std::to_string(m.n_ctx) +
                               " tokens, however input " + std::to_string(i) + " has " + std::to_string(n) + " tokens",
                           r.inputs.size() == 1 ? "input" : "input[" + std::to_string(i) + "]",
                           "context_length_exceeded");
        n_tokens += n;
    }
    std::vector<JobSpec> jobs(r.inputs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
        jobs[i].prompt = r.inputs[i];
        jobs[i].embed = true;
        jobs[i].pooling = m.pooling;
    }
    const auto stream = submit(m, std::move(jobs));
    std::vector<Choice> choices(r.inputs.size());
    const std::vector<JobEvent> finals = collect(*stream, choices, watch_of(req));
    ordered_json data = ordered_json::array();
    for (size_t i = 0; i < finals.size(); ++i) {
        const std::vector<float>& v = finals[i].embedding;
        data.push_back({{"object", "embedding"},
                        {"index", i},
                        {"embedding", r.base64 ? ordered_json(base64_floats(v)) : ordered_json(v)}});
    }
    const ordered_json body = {{"object", "list"},
                               {"data", std::move(data)},
                               {"model", m.id},
                               {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}};
    res.set_content(dump(body), "application/json");
}

}  // namespace deskside::server
