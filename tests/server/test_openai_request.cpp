// Request validation: every field OpenAI documents is honoured, accepted as a no-op, or rejected
// with a 400 whose `param` names it (the error shape is OpenAI's API reference).
#include <catch2/catch.hpp>

#include "server/api_error.h"
#include "server/openai_request.h"

using deskside::server::ApiError;
using deskside::server::parse_chat_request;
using deskside::server::parse_completion_request;
using nlohmann::json;

namespace {

// The ApiError a parse throws (fails the test when it does not throw).
template <typename F>
ApiError error_of(F&& f) {
    try {
        f();
    } catch (const ApiError& e) {
        return e;
    }
    FAIL("no ApiError thrown");
    throw;
}

json chat(json extra = json::object()) {
    json j = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    j.update(extra);
    return j;
}

json completion(json extra = json::object()) {
    json j = {{"model", "m"}, {"prompt", "Once"}};
    j.update(extra);
    return j;
}

}  // namespace

TEST_CASE("chat request: fields are parsed", "[server]") {
    const auto r = parse_chat_request(chat({{"max_completion_tokens", 7}, {"temperature", 0}, {"top_p", 0.5}, {"n", 2},
                                            {"stop", "x"}, {"seed", 42}, {"logprobs", true}, {"top_logprobs", 3},
                                            {"stream", true}, {"stream_options", {{"include_usage", true}}},
                                            {"logit_bias", {{"12", -100}}}, {"user", "u"}, {"metadata", {{"a", "b"}}},
                                            {"response_format", {{"type", "text"}}}}));
    CHECK(r.gen.max_tokens == 7);
    CHECK(r.gen.temperature == 0);
    CHECK(r.gen.n == 2);
    CHECK(r.gen.stop == std::vector<std::string>{"x"});
    CHECK(r.gen.seed == 42u);
    CHECK(r.gen.logprobs);
    CHECK(r.gen.top_logprobs == 3);
    CHECK(r.gen.include_usage);
    REQUIRE(r.gen.logit_bias.size() == 1);
    CHECK(r.gen.logit_bias[0].first == 12);
    CHECK(r.messages.size() == 1);
}

TEST_CASE("chat request: content parts are joined, developer becomes system", "[server]") {
    const auto r = parse_chat_request(chat({{"messages",
                                             {{{"role", "developer"}, {"content", "be brief"}},
                                              {{"role", "user"},
                                               {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}}));
    CHECK(r.messages[0]["role"] == "system");
    CHECK(r.messages[1]["content"] == "ab");
}

TEST_CASE("chat request: what we cannot honour is a 400 naming the field", "[server]") {
    for (const char* field : {"audio", "modalities", "prediction"}) {
        const ApiError e = error_of([&] { parse_chat_request(chat({{field, json::array({1})}})); });
        CHECK(e.status() == 400);
        CHECK(e.param() == field);
    }
    auto e = error_of([] { parse_chat_request(chat({{"response_format", {{"type", "xml"}}}})); });
    CHECK(e.param() == "response_format.type");
    e = error_of([] {
        parse_chat_request(chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "bad name!"}}}}}}));
    });
    CHECK(e.param() == "response_format.json_schema.name");
    e = error_of([] { parse_chat_request(chat({{"reasoning_effort", "extreme"}})); });
    CHECK(e.param() == "reasoning_effort");
    e = error_of([] { parse_chat_request(chat({{"chat_template_kwargs", {{"messages", 1}}}})); });
    CHECK(e.param() == "chat_template_kwargs.messages");
    e = error_of([] { parse_chat_request(chat({{"frobnicate", 1}})); });
    CHECK(e.param() == "frobnicate");
    e = error_of([] { parse_chat_request(chat({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}})); });
    CHECK(e.param() == "messages[0].content[0].type");
}

TEST_CASE("chat request: response_format, sampler extras and template variables are read", "[server]") {
    const auto r = parse_chat_request(chat({{"response_format",
                                             {{"type", "json_schema"},
                                              {"json_schema", {{"name", "p"}, {"strict", true},
                                                               {"schema", {{"type", "object"}}}}}}},
                                            {"top_k", 5}, {"min_p", 0.1}, {"typical_p", 0.9}, {"repetition_penalty", 1.2},
                                            {"chat_template_kwargs", {{"enable_thinking", false}}}}));
    CHECK(r.response_format.kind == deskside::server::ResponseFormat::Kind::kJsonSchema);
    CHECK(r.response_format.name == "p");
    CHECK(r.response_format.strict);
    CHECK(r.response_format.schema == nlohmann::ordered_json{{"type", "object"}});
    CHECK(r.gen.top_k == 5);
    CHECK(r.gen.min_p == Approx(0.1));
    CHECK(r.gen.typical_p == Approx(0.9));
    CHECK(r.gen.repetition_penalty == Approx(1.2));
    CHECK(r.template_kwargs["enable_thinking"] == false);
}

TEST_CASE("chat request: wrong types and ranges name the field", "[server]") {
    const std::vector<std::pair<json, std::string>> cases = {
        {{{"temperature", "hot"}}, "temperature"},   {{{"temperature", 2.5}}, "temperature"},
        {{{"top_p", -0.1}}, "top_p"},                {{{"n", 0}}, "n"},
        {{{"max_tokens", 1.5}}, "max_tokens"},       {{{"max_tokens", 0}}, "max_tokens"},
        {{{"stop", {1}}}, "stop[0]"},                {{{"presence_penalty", 3}}, "presence_penalty"},
        {{{"top_logprobs", 21}}, "top_logprobs"},    {{{"logit_bias", {{"x", 1}}}}, "logit_bias.x"},
        {{{"messages", json::array()}}, "messages"}, {{{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, "messages[0].role"},
        {{{"model", 3}}, "model"},                   {{{"stream", "yes"}}, "stream"},
    };
    for (const auto& [extra, param] : cases) {
        INFO(extra.dump());
        const ApiError e = error_of([&] { parse_chat_request(chat(extra)); });
        CHECK(e.status() == 400);
        CHECK(e.param() == param);
        const auto body = e.body();
        CHECK(body["error"]["type"] == "invalid_request_error");
        CHECK(body["error"].contains("code"));
        CHECK(body["error"]["message"].is_string());
    }
    CHECK(error_of([] { parse_chat_request(json::array()); }).status() == 400);
    CHECK(error_of([] { parse_chat_request(json{{"messages", {{{"role", "user"}, {"content", "x"}}}}}); }).param() == "model");
}

TEST_CASE("completion request: prompt forms", "[server]") {
    using deskside::server::Prompt;
    CHECK(std::get<std::string>(parse_completion_request(completion()).prompts.at(0)) == "Once");
    auto r = parse_completion_request(completion({{"prompt", {1, 2, 3}}}));
    CHECK(std::get<std::vector<int32_t>>(r.prompts.at(0)) == std::vector<int32_t>{1, 2, 3});
    r = parse_completion_request(completion({{"prompt", {{1, 2}, {3}}}}));
    CHECK(r.prompts.size() == 2);
    r = parse_completion_request(completion({{"prompt", {"a", "b"}}, {"echo", true}, {"logprobs", 2}, {"max_tokens", 0}}));
    CHECK(r.prompts.size() == 2);
    CHECK(r.echo);
    CHECK(r.gen.logprobs);
    CHECK(r.gen.top_logprobs == 2);
    CHECK(r.gen.max_tokens == 0);
    CHECK(error_of([] { parse_completion_request(completion({{"suffix", "x"}, {"echo", true}})); }).param() == "suffix");
    CHECK(error_of([] { parse_completion_request(completion({{"prompt", {1, -2}}})); }).param() == "prompt[1]");
    CHECK(error_of([] { parse_completion_request(completion({{"prompt", {{1}, 5}}})); }).param() == "prompt[1]");
    CHECK(error_of([] { parse_completion_request(json{{"model", "m"}}); }).param() == "prompt");
    CHECK(error_of([] { parse_completion_request(completion({{"stream_options", {{"include_usage", true}}}})); }).param() ==
          "stream_options");
}
