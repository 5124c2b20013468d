#include "server/openai_handlers.h"

#include <array>
#include <chrono>
#include <optional>
#include <random>

#include "engine/grammar.h"
#include "server/api_error.h"
#include "server/connection_watch.h"
#include "server/http_policy.h"
#include "server/openai_request.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace deskside::server {
namespace {

using nlohmann::ordered_json;

struct Usage {
    int64_t prompt = 0, completion = 0, cached = 0;
    ordered_json json() const {
        return {{"prompt_tokens", prompt},
                {"completion_tokens", completion},
                {"total_tokens", prompt + completion},
                {"prompt_tokens_details", {{"cached_tokens", cached}}}};
    }
};

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void check_model(const GenerationRequest& g, const ServedModel& m) {
    if (g.model != m.id)
        throw ApiError(404, "The model '" + g.model + "' does not exist; this server serves '" + m.id + "'", "model",
                       "model_not_found");
}

std::vector<int32_t> tokenize_prompt(const Prompt& p, const ServedModel& m, const std::string& param, bool parse_special) {
    if (const auto* text = std::get_if<std::string>(&p)) {
        if (text->empty()) throw invalid_param(param, "'" + param + "' must not be empty");
        return m.tokenizer->encode(*text, true, parse_special);
    }
    const auto& ids = std::get<std::vector<int32_t>>(p);
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] >= m.tokenizer->n_vocab())
            throw invalid_param(param + "[" + std::to_string(i) + "]",
                                "token id " + std::to_string(ids[i]) + " is outside the vocabulary (" +
                                    std::to_string(m.tokenizer->n_vocab()) + " tokens)");
    return ids;
}

// Fill-in-the-middle control tokens, in the prefix-suffix-middle order the models were trained on.
struct FimTokens {
    int32_t prefix = -1, suffix = -1, middle = -1;
};

// The FIM tokens of the vocabulary (Qwen2.5-Coder's and StarCoder's spellings); 400 when it has none.
FimTokens fim_tokens(const models::Tokenizer& tok) {
    const auto control = [&](const char* text) -> std::optional<int32_t> {
        const std::vector<int32_t> ids = tok.encode(text, false, true);
        if (ids.size() == 1 && tok.is_control(ids[0])) return ids[0];
        return std::nullopt;
    };
    for (const auto& names : {std::array{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},
                              std::array{"<fim_prefix>", "<fim_suffix>", "<fim_middle>"}}) {
        const auto p = control(names[0]), s = control(names[1]), mid = control(names[2]);
        if (p && s && mid) return {*p, *s, *mid};
    }
    throw invalid_param("suffix", "'suffix' needs a model with fill-in-the-middle tokens; this model's vocabulary has none");
}

// <prefix> PROMPT <suffix> SUFFIX <middle>: the completion is what goes between the two texts.
std::vector<int32_t> fim_prompt(const FimTokens& fim, const Prompt& p, const std::string& suffix, const ServedModel& m,
                                const std::string& param) {
    const auto* text = std::get_if<std::string>(&p);
    if (!text) throw invalid_param(param, "'" + param + "' must be text when 'suffix' is given");
    std::vector<int32_t> ids = {fim.prefix};
    const auto append = [&](const std::string& t) {
        const std::vector<int32_t> more = m.tokenizer->encode(t, false, m.parse_special);
        ids.insert(ids.end(), more.begin(), more.end());
    };
    append(*text);
    ids.push_back(fim.suffix);
    append(suffix);
    ids.push_back(fim.middle);
    return ids;
}

// OpenAI's rule: the prompt and the tokens asked for must fit the context together (a request
// that cannot get what it asks for is refused, not cut short).
void check_length(const std::vector<int32_t>& prompt, const ServedModel& m, const std::string& param,
                  std::optional<int64_t> max_tokens) {
    const auto n_prompt = static_cast<int64_t>(prompt.size());
    if (n_prompt > m.n_ctx)
        throw ApiError(400,
                       "This model's maximum context length is " + std::to_string(m.n_ctx) + " tokens, however the prompt has " +
                           std::to_string(prompt.size()) + " tokens",
                       param, "context_length_exceeded");
    if (max_tokens && n_prompt + *max_tokens > m.n_ctx)
        throw ApiError(400,
                       "This model's maximum context length is " + std::to_string(m.n_ctx) + " tokens. However, you requested " +
                           std::to_string(n_prompt + *max_tokens) + " tokens (" + std::to_string(n_prompt) +
                           " in the prompt, " + std::to_string(*max_tokens) + " for the completion)",
                       "max_tokens", "context_length_exceeded");
}

// The jobs of a request: n per prompt, each with its own generator (seed + choice index when a
// seed is given, so choices differ but the request is reproducible).
std::vector<JobSpec> make_jobs(const GenerationRequest& g, const std::vector<std::vector<int32_t>>& prompts,
                               int64_t default_max, bool prompt_logprobs, const ServedModel& m) {
    std::vector<JobSpec> jobs;
    std::random_device rd;
    for (const auto& prompt : prompts) {
        for (int64_t i = 0; i < g.n; ++i) {
            JobSpec j;
            j.prompt = prompt;
            j.max_tokens = g.max_tokens.value_or(default_max);
            engine::SamplerParams& s = j.sampling;
            s.temperature = static_cast<float>(g.temperature);
            s.top_k = static_cast<int32_t>(std::max<int64_t>(g.top_k, 0));
            s.top_p = static_cast<float>(g.top_p);
            s.min_p = static_cast<float>(g.min_p);
            s.typical_p = static_cast<float>(g.typical_p);
            s.repeat_penalty = static_cast<float>(g.repetition_penalty);
            s.presence_penalty = static_cast<float>(g.presence_penalty);
            s.frequency_penalty = static_cast<float>(g.frequency_penalty);
            s.penalty_last_n = static_cast<int32_t>(m.n_ctx);
            for (const auto& [id, bias] : g.logit_bias) {
                if (id >= m.tokenizer->n_vocab())
                    throw invalid_param("logit_bias." + std::to_string(id), "token id " + std::to_string(id) + " is outside the vocabulary");
                s.logit_bias.emplace_back(id, bias <= -100 ? -INFINITY : bias);
            }
            if (g.ignore_eos)
                for (const int32_t id : m.tokenizer->eog_ids()) s.logit_bias.emplace_back(id, -INFINITY);
            s.seed = g.seed ? *g.seed + static_cast<uint64_t>(jobs.size()) : (static_cast<uint64_t>(rd()) << 32 | rd());
            j.stop = g.stop;
            j.logprobs = g.logprobs;
            j.top_logprobs = g.top_logprobs;
            j.prompt_logprobs = prompt_logprobs;
            jobs.push_back(std::move(j));
        }
    }
    return jobs;
}

}  // namespace

std::shared_ptr<RequestStream> submit(const ServedModel& m, std::vector<JobSpec> jobs) {
    std::shared_ptr<RequestStream> stream;
    try {
        stream = m.engine->submit(std::move(jobs));
    } catch (const QueueFull& e) {
        throw ApiError(503, std::string(e.what()) + "; retry later", "", "queue_full", "overloaded_error");
    } catch (const std::invalid_argument& e) {  // the sampler refused a parameter
        throw ApiError(400, e.what(), "", "invalid_value");
    }
    return stream;
}

// Waits for every job; throws ApiError 500 when one failed. A client that closed its connection
// (seen through `watch`, checked every kWatchInterval) cancels the jobs: the engine drops them at
// its next step and frees their KV blocks; 499 is what the metrics count (nobody reads it).
std::vector<JobEvent> collect(RequestStream& stream, std::vector<Choice>& choices, const std::optional<ConnectionWatch>& watch) {
    constexpr auto kWatchInterval = std::chrono::milliseconds(100);
    std::vector<JobEvent> finals(choices.size());
    size_t n_done = 0;
    auto last_check = std::chrono::steady_clock::now();
    while (n_done < choices.size()) {
        auto e = stream.pop(kWatchInterval);
        if (watch && std::chrono::steady_clock::now() - last_check >= kWatchInterval) {
            last_check = std::chrono::steady_clock::now();
            if (watch->peer_closed()) {
                stream.cancel();
                throw ApiError(499, "the client closed the connection before the response was ready", "", "client_closed");
            }
        }
        if (!e) continue;
        Choice& c = choices[e->choice];
        c.text += e->text;
        for (auto& t : e->tokens) c.tokens.push_back(std::move(t));
        if (e->done) {
            if (e->finish_reason == "error") {
                stream.cancel();
                throw ApiError(500, "generation failed: " + e->error, "", "", "server_error");
            }
            c.finish_reason = e->finish_reason;
            ++n_done;
            finals[e->choice] = std::move(*e);
        }
    }
    return finals;
}

std::optional<ConnectionWatch> watch_of(const httplib::Request& req) {
    return ConnectionWatch::find(req.local_port, req.remote_addr, req.remote_port);
}

namespace {

Usage usage_of(const std::vector<JobEvent>& finals, int64_t n) {
    Usage u;
    for (size_t i = 0; i < finals.size(); ++i) {
        // Choices of one prompt share it: count each prompt once.
        if (static_cast<int64_t>(i) % n == 0) {
            u.prompt += finals[i].prompt_tokens;
            u.cached += finals[i].cached_tokens;
        }
        u.completion += finals[i].completion_tokens;
    }
    return u;
}

ordered_json bytes_of(const std::string& s) {
    ordered_json b = ordered_json::array();
    for (const unsigned char c : s) b.push_back(c);
    return b;
}

ordered_json chat_logprobs(const std::vector<TokenLogprob>& tokens, const models::Tokenizer& tok) {
    ordered_json content = ordered_json::array();
    for (const TokenLogprob& t : tokens) {
        const std::string piece = tok.piece(t.id);
        ordered_json top = ordered_json::array();
        for (const auto& [id, lp] : t.top) {
            const std::string p = tok.piece(id);
            top.push_back({{"token", p}, {"logprob", lp}, {"bytes", bytes_of(p)}});
        }
        content.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
}

// The legacy completions shape; `offset` is the text offset (bytes) of the first token.
ordered_json legacy_logprobs(const std::vector<std::optional<TokenLogprob>>& tokens, const models::Tokenizer& tok,
                             size_t offset) {
    ordered_json out = {{"tokens", ordered_json::array()},
                        {"token_logprobs", ordered_json::array()},
                        {"top_logprobs", ordered_json::array()},
                        {"text_offset", ordered_json::array()}};
    for (const auto& t : tokens) {
        const std::string piece = t ? tok.piece(t->id) : std::string();
        out["tokens"].push_back(piece);
        out["text_offset"].push_back(offset);
        offset += piece.size();
        if (!t || t->logprob != t->logprob) {
            out["token_logprobs"].push_back(nullptr);
            out["top_logprobs"].push_back(nullptr);
            continue;
        }
        out["token_logprobs"].push_back(t->logprob);
        ordered_json top = ordered_json::object();
        for (const auto& [id, lp] : t->top) top[tok.piece(id)] = lp;
        out["top_logprobs"].push_back(top);
    }
    return out;
}

// Prompt token positions for echo: position 0 has no logprob (nothing precedes it).
std::vector<std::optional<TokenLogprob>> prompt_entries(const std::vector<int32_t>& prompt,
                                                         const std::vector<std::optional<TokenLogprob>>& scored) {
    std::vector<std::optional<TokenLogprob>> out;
    for (size_t i = 0; i < prompt.size(); ++i) {
        if (i < scored.size() && scored[i]) {
            out.push_back(scored[i]);
        } else {
            TokenLogprob t{prompt[i], NAN, {}};
            out.push_back(t);
        }
    }
    return out;
}

// Streams events as SSE; `chunk(event)` turns one event into the JSON chunks to send;
// `usage_chunk` is sent last when asked.
void stream_sse(httplib::Response& res, std::shared_ptr<RequestStream> stream, size_t n_choices,
                std::function<std::vector<ordered_json>(const JobEvent&)> chunk, std::vector<ordered_json> first,
                std::function<std::optional<ordered_json>(const std::vector<JobEvent>&)> usage_chunk) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [stream, n_choices, chunk, first, usage_chunk](size_t, httplib::DataSink& sink) {
            const auto send = [&](const std::string& data) {
                const std::string line = "data: " + data + "\n\n";
                return sink.write(line.data(), line.size());
            };
            for (const auto& c : first)
                if (!send(dump(c))) return stream->cancel(), false;
            std::vector<JobEvent> finals(n_choices);
            size_t n_done = 0;
            while (n_done < n_choices) {
                auto e = stream->pop(std::chrono::milliseconds(100));
                if (!e) {
                    if (!sink.is_writable()) return stream->cancel(), false;
                    continue;
                }
                if (e->done && e->finish_reason == "error") {
                    stream->cancel();
                    const ApiError err(500, "generation failed: " + e->error, "", "", "server_error");
                    send(err.body().dump());
                    return false;
                }
                for (const auto& c : chunk(*e))
                    if (!send(dump(c))) return stream->cancel(), false;
                if (e->done) {
                    finals[e->choice] = std::move(*e);
                    ++n_done;
                }
            }
            if (const auto u = usage_chunk(finals); u && !send(dump(*u))) return false;
            if (!send("[DONE]")) return false;
            sink.done();
            return true;
        },
        [stream](bool) { stream->cancel(); });
}

template <typename Json>
Json parse_json_body(const httplib::Request& req) {
    return parse_request_json<Json>(req.body);
}

// vLLM's extension: the stop string a choice ended at (null at an end-of-generation token or length).
ordered_json stop_reason(const JobEvent& final_event) {
    return final_event.stop_matched.empty() ? ordered_json(nullptr) : ordered_json(final_event.stop_matched);
}

// The grammar of a JSON response_format; a schema keyword it cannot enforce is a 400 naming it.
std::shared_ptr<const engine::Grammar> response_grammar(const ResponseFormat& f) {
    if (f.kind == ResponseFormat::Kind::kJsonObject) return engine::json_object_grammar();
    try {
        // OpenAI's strict mode and ours alike: the output always matches the schema.
        return f.schema.is_null() ? engine::json_object_grammar() : engine::json_schema_grammar(f.schema);
    } catch (const engine::SchemaError& e) {
        const std::string path = "response_format.json_schema.schema" + (e.path.empty() ? "" : "." + e.path);
        throw ApiError(400, std::string(e.what()), path, "unsupported_schema");
    }
}

// A chat answer with tools: calls are shown as tool_calls, or as the legacy function_call (one
// call) when the request used functions.
ordered_json tool_message(const ParsedToolCalls& p, const ToolsRequest& t) {
    ordered_json msg = {{"role", "assistant"},
                        {"content", p.calls.empty() || !p.content.empty() ? ordered_json(p.content) : ordered_json(nullptr)},
                        {"refusal", nullptr}};
    if (p.calls.empty()) return msg;
    if (t.legacy) {
        msg["function_call"] = {{"name", p.calls[0].name}, {"arguments", p.calls[0].arguments}};
        return msg;
    }
    ordered_json calls = ordered_json::array();
    for (const ToolCall& c : p.calls) {
        ordered_json fn = {{"name", c.name}, {"arguments", c.arguments}};
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", std::move(fn)}});
    }
    msg["tool_calls"] = std::move(calls);
    return msg;
}

// "tool_calls" once the model ended after complete calls; a call cut by max_tokens keeps "length",
// as OpenAI's does, and one cut by a stop string (or broken) keeps "stop".
std::string tool_finish_reason(const std::string& engine_reason, size_t n_calls, bool cut, const ToolsRequest& t) {
    if (n_calls == 0 || cut || engine_reason != "stop") return engine_reason;
    return t.legacy ? "function_call" : "tool_calls";
}

// The deltas OpenAI streams for one parser event: content, a call's head (index, id, type, name
// and empty arguments), or the next piece of its arguments.
ordered_json tool_delta(const ToolCallEvent& e, bool legacy) {
    if (e.is_content()) return {{"content", e.content}};
    if (legacy)
        return {{"function_call", e.call ? ordered_json{{"name", e.call->name}, {"arguments", ""}}
                                         : ordered_json{{"arguments", e.arguments}}}};
    ordered_json call = {{"index", e.index}};
    if (e.call) {
        call["id"] = e.call->id;
        call["type"] = "function";
        call["function"] = {{"name", e.call->name}, {"arguments", ""}};
    } else {
        call["function"] = {{"arguments", e.arguments}};
    }
    return {{"tool_calls", ordered_json::array({std::move(call)})}};
}

// The tool-call parsers of a streamed answer, one per choice; they live as long as the stream.
struct StreamedToolCalls {
    StreamedToolCalls(const ToolsRequest& t, ToolFormat format, size_t n) : tools(t) {
        streams.reserve(n);
        for (size_t i = 0; i < n; ++i) streams.emplace_back(format, tools);
    }
    const ToolsRequest tools;
    std::vector<ToolCallStream> streams;
};

}  // namespace

nlohmann::json parse_body(const httplib::Request& req) { return parse_json_body<nlohmann::json>(req); }

std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

void handle_completions(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model) {
    const ServedModel& m = *model;
    const CompletionRequest r = parse_completion_request(parse_body(req));
    check_model(r.gen, m);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> prompt_texts;
    const std::optional<FimTokens> fim = r.suffix ? std::optional(fim_tokens(*m.tokenizer)) : std::nullopt;
    for (size_t i = 0; i < r.prompts.size(); ++i) {
        const std::string param = r.prompts.size() == 1 ? "prompt" : "prompt[" + std::to_string(i) + "]";
        if (fim)
            prompts.push_back(fim_prompt(*fim, r.prompts[i], *r.suffix, m, param));
        else
            prompts.push_back(tokenize_prompt(r.prompts[i], m, param, m.parse_special));
        check_length(prompts.back(), m, param, r.gen.max_tokens.value_or(16));
        if (const auto* s = std::get_if<std::string>(&r.prompts[i]))
            prompt_texts.push_back(*s);
        else
            prompt_texts.push_back(m.tokenizer->decode(prompts.back()));
    }
    const bool prompt_lp = r.echo && r.gen.logprobs;
    const int64_t n = r.gen.n;
    auto stream = submit(m, make_jobs(r.gen, prompts, 16, prompt_lp, m));
    const std::string id = random_id("cmpl-");
    const int64_t created = unix_now();
    const auto choice_json = [&](size_t i, const std::string& text, ordered_json logprobs, ordered_json finish) {
        return ordered_json{{"index", i}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}};
    };
    const auto envelope = [id, created, mid = m.id](ordered_json choices) {
        return ordered_json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", mid},
                            {"system_fingerprint", nullptr}, {"choices", std::move(choices)}};
    };
    const models::Tokenizer& tok = *m.tokenizer;

    if (!r.gen.stream) {
        std::vector<Choice> choices(prompts.size() * static_cast<size_t>(n));
        const std::vector<JobEvent> finals = collect(*stream, choices, watch_of(req));
        ordered_json arr = ordered_json::array();
        for (size_t i = 0; i < choices.size(); ++i) {
            const size_t p = i / static_cast<size_t>(n);
            const std::string prefix = r.echo ? prompt_texts[p] : std::string();
            ordered_json lp = nullptr;
            if (r.gen.logprobs) {
                std::vector<std::optional<TokenLogprob>> entries;
                if (r.echo) entries = prompt_entries(prompts[p], finals[i].prompt_logprobs);
                for (const auto& t : choices[i].tokens) entries.emplace_back(t);
                lp = legacy_logprobs(entries, tok, r.echo ? 0 : prompt_texts[p].size());
            }
            arr.push_back(choice_json(i, prefix + choices[i].text, lp, choices[i].finish_reason));
            arr.back()["stop_reason"] = stop_reason(finals[i]);
        }
        ordered_json body = envelope(arr);
        body["usage"] = usage_of(finals, n).json();
        res.set_content(dump(body), "application/json");
        return;
    }
    std::vector<ordered_json> first;
    if (r.echo && !r.gen.logprobs)
        for (size_t i = 0; i < prompts.size() * static_cast<size_t>(n); ++i)
            first.push_back(envelope(ordered_json::array({choice_json(i, prompt_texts[i / n], nullptr, nullptr)})));
    // With echo and logprobs the prompt's scores arrive with the final event of each choice.
    auto text_offsets = std::make_shared<std::vector<size_t>>();
    for (size_t i = 0; i < prompts.size() * static_cast<size_t>(n); ++i)
        text_offsets->push_back(r.echo ? 0 : prompt_texts[i / n].size());
    const bool logprobs = r.gen.logprobs, echo = r.echo;
    auto chunk = [=, &tok](const JobEvent& e) {
        std::vector<ordered_json> out;
        const size_t p = e.choice / static_cast<size_t>(n);
        std::string text = e.text;
        ordered_json lp = nullptr;
        if (logprobs) {
            std::vector<std::optional<TokenLogprob>> entries;
            if (echo && e.done) {
                entries = prompt_entries(prompts[p], e.prompt_logprobs);
                text = prompt_texts[p] + text;
            }
            for (const auto& t : e.tokens) entries.emplace_back(t);
            lp = legacy_logprobs(entries, tok, (*text_offsets)[e.choice]);
            for (const auto& x : lp["tokens"]) (*text_offsets)[e.choice] += x.get<std::string>().size();
        }
        if (!text.empty() || e.done || logprobs)
            out.push_back(envelope(ordered_json::array(
                {choice_json(e.choice, text, lp, e.done ? ordered_json(e.finish_reason) : ordered_json(nullptr))})));
        return out;
    };
    auto usage = [=](const std::vector<JobEvent>& finals) -> std::optional<ordered_json> {
        if (!r.gen.include_usage) return std::nullopt;
        ordered_json body = envelope(ordered_json::array());
        body["usage"] = usage_of(finals, n).json();
        return body;
    };
    stream_sse(res, stream, prompts.size() * static_cast<size_t>(n), chunk, first, usage);
}

void handle_chat_completions(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model) {
    const ServedModel& m = *model;
    const ChatRequest r = parse_chat_request(parse_json_body<ordered_json>(req));
    check_model(r.gen, m);
    if (!m.chat_template)
        throw ApiError(400,
                       "the model '" + m.id + "' has no chat template; start the server with --chat-template FILE or use /v1/completions",
                       "messages", "no_chat_template");
    const models::Tokenizer& tok = *m.tokenizer;
    const auto token_text = [&](std::optional<int32_t> id) { return id ? tok.token_text(*id) : std::string(); };
    ordered_json extra = r.template_kwargs;
    if (r.reasoning_effort) {
        // Only templates that read it can honour it (gpt-oss's); elsewhere it would be dropped.
        if (m.chat_template->source().find("reasoning_effort") == std::string::npos)
            throw ApiError(400, "this model's chat template takes no reasoning_effort", "reasoning_effort",
                           "unsupported_parameter");
        extra["reasoning_effort"] = *r.reasoning_effort;
    }
    std::string text;
    try {
        text = m.chat_template->render(models::ChatTemplate::make_context(r.messages, r.tools.tools, true,
                                                                         token_text(tok.bos()), token_text(tok.eos()),
                                                                         extra));
    } catch (const models::TemplateError& e) {
        throw ApiError(400, std::string("the chat template rejected these messages: ") + e.what(), "messages", "template_error");
    }
    // Templates usually write BOS themselves; add it only where the text does not start with it.
    const std::string bos = token_text(tok.bos());
    const bool template_has_bos = !bos.empty() && text.rfind(bos, 0) == 0;
    std::vector<int32_t> prompt = tok.encode(text, !template_has_bos, true);
    check_length(prompt, m, "messages", r.gen.max_tokens);
    const int64_t n = r.gen.n;
    const int64_t room = m.n_ctx - static_cast<int64_t>(prompt.size());
    std::vector<JobSpec> jobs = make_jobs(r.gen, {prompt}, std::max<int64_t>(room, 0), false, m);
    const ToolFormat tool_format = m.tool_format.value_or(detect_tool_format(m.chat_template->source()));
    const bool forced_call = r.tools.choice == ToolChoice::kRequired || r.tools.choice == ToolChoice::kNamed;
    if (forced_call && r.response_format.kind != ResponseFormat::Kind::kText)
        throw invalid_param("response_format", "'response_format' cannot be combined with a required or named tool_choice");
    std::shared_ptr<const engine::Grammar> grammar;
    std::string trigger;
    ToolsRequest tools = r.tools;
    if (forced_call) grammar = tool_call_grammar(tools, tool_format);
    if (tools.choice == ToolChoice::kAuto && has_strict_function(tools) &&
        r.response_format.kind == ResponseFormat::Kind::kText) {
        // Strict tools the model may call or not: a grammar that starts at the call marker.
        LazyToolGrammar lazy = strict_tool_call_grammar(tools, tool_format, tools.legacy ? "functions" : "tools");
        grammar = std::move(lazy.grammar);
        trigger = std::move(lazy.trigger);
        tools.fenced_calls = false;
    }
    if (r.response_format.kind != ResponseFormat::Kind::kText) grammar = response_grammar(r.response_format);
    for (JobSpec& j : jobs) {
        j.grammar = grammar;
        j.grammar_trigger = trigger;
    }
    // With a grammar the answer is the format from its first token: no reasoning block to split
    // (a lazy one leaves the answer free until a call).
    const bool thinks = (!grammar || !trigger.empty()) && template_thinks(m.chat_template->source());
    const bool parse_calls = tools.parse_calls() && r.response_format.kind == ResponseFormat::Kind::kText;
    auto stream = submit(m, std::move(jobs));
    const std::string id = random_id("chatcmpl-");
    const int64_t created = unix_now();
    const auto envelope = [id, created, mid = m.id](const char* object, ordered_json choices) {
        return ordered_json{{"id", id}, {"object", object}, {"created", created}, {"model", mid},
                            {"system_fingerprint", nullptr}, {"choices", std::move(choices)}};
    };
    if (!r.gen.stream) {
        std::vector<Choice> choices(static_cast<size_t>(n));
        const std::vector<JobEvent> finals = collect(*stream, choices, watch_of(req));
        ordered_json arr = ordered_json::array();
        for (size_t i = 0; i < choices.size(); ++i) {
            std::string content = choices[i].text, reasoning;
            if (thinks) {
                ReasoningSplitter split(text);
                ReasoningSplitter::Parts a = split.push(content), b = split.flush();
                reasoning = a.reasoning + b.reasoning;
                content = a.content + b.content;
            }
            ordered_json message = {{"role", "assistant"}, {"content", content}, {"refusal", nullptr}};
            std::string finish = choices[i].finish_reason;
            if (parse_calls) {
                const ParsedToolCalls p = parse_tool_calls(content, tool_format, tools);
                message = tool_message(p, tools);
                finish = tool_finish_reason(finish, p.calls.size(), p.cut, tools);
            }
            if (!reasoning.empty()) message["reasoning_content"] = reasoning;
            arr.push_back({{"index", i},
                           {"message", std::move(message)},
                           {"logprobs", r.gen.logprobs ? chat_logprobs(choices[i].tokens, tok) : ordered_json(nullptr)},
                           {"finish_reason", finish},
                           {"stop_reason", stop_reason(finals[i])}});
        }
        ordered_json body = envelope("chat.completion", arr);
        body["usage"] = usage_of(finals, n).json();
        res.set_content(dump(body), "application/json");
        return;
    }
    std::vector<ordered_json> first;
    for (int64_t i = 0; i < n; ++i)
        first.push_back(envelope("chat.completion.chunk",
                                 ordered_json::array({{{"index", i},
                                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                       {"logprobs", nullptr},
                                                       {"finish_reason", nullptr}}})));
    const bool logprobs = r.gen.logprobs;
    const auto calls =
        parse_calls ? std::make_shared<StreamedToolCalls>(tools, tool_format, static_cast<size_t>(n)) : nullptr;
    const auto splitters = thinks ? std::make_shared<std::vector<ReasoningSplitter>>(static_cast<size_t>(n),
                                                                                     ReasoningSplitter(text))
                                  : nullptr;
    auto chunk = [=, &tok](const JobEvent& e) {
        std::vector<ordered_json> out;
        const ordered_json lp = logprobs && !e.tokens.empty() ? chat_logprobs(e.tokens, tok) : ordered_json(nullptr);
        std::vector<ordered_json> deltas;
        std::string finish = e.finish_reason;
        std::string content = e.text;
        if (splitters) {
            ReasoningSplitter& split = (*splitters)[e.choice];
            ReasoningSplitter::Parts p = split.push(content);
            if (e.done) {
                ReasoningSplitter::Parts rest = split.flush();
                p.reasoning += rest.reasoning;
                p.content += rest.content;
            }
            if (!p.reasoning.empty()) deltas.push_back({{"reasoning_content", p.reasoning}});
            content = std::move(p.content);
        }
        if (!calls) {
            if (!content.empty()) deltas.push_back({{"content", content}});
        } else {
            ToolCallStream& parser = calls->streams[e.choice];
            std::vector<ToolCallEvent> events = parser.feed(content);
            if (e.done) {
                for (ToolCallEvent& x : parser.finish()) events.push_back(std::move(x));
                finish = tool_finish_reason(finish, parser.n_calls(), parser.cut(), calls->tools);
            }
            for (const ToolCallEvent& x : events) deltas.push_back(tool_delta(x, calls->tools.legacy));
        }
        if (deltas.empty() && !lp.is_null()) deltas.push_back({{"content", ""}});
        for (size_t k = 0; k < deltas.size(); ++k)
            out.push_back(envelope("chat.completion.chunk",
                                   ordered_json::array({{{"index", e.choice},
                                                         {"delta", std::move(deltas[k])},
                                                         {"logprobs", k == 0 ? lp : ordered_json(nullptr)},
                                                         {"finish_reason", nullptr}}})));
        if (e.done)
            out.push_back(envelope("chat.completion.chunk",
                                   ordered_json::array({{{"index", e.choice},
                                                         {"delta", ordered_json::object()},
                                                         {"logprobs", nullptr},
                                                         {"finish_reason", finish},
                                                         {"stop_reason", stop_reason(e)}}})));
        return out;
    };
    auto usage = [=](const std::vector<JobEvent>& finals) -> std::optional<ordered_json> {
        if (!r.gen.include_usage) return std::nullopt;
        ordered_json body = envelope("chat.completion.chunk", ordered_json::array());
        body["usage"] = usage_of(finals, n).json();
        return body;
    };
    stream_sse(res, stream, static_cast<size_t>(n), chunk, first, usage);
}

}  // namespace deskside::server
