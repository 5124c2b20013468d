// The browser-facing rules (Host, Content-Type, CORS), the access-log line, and /metrics labels
// that clients cannot choose.
#include <catch2/catch.hpp>

#include "server/http_policy.h"
#include "server/metrics.h"

using namespace deskside::server;

TEST_CASE("host check: IPs, localhost and dotless names pass, other domains need --allow-host", "[server]") {
    const std::vector<std::string> none;
    for (const char* ok : {"", "127.0.0.1", "127.0.0.1:8080", "[::1]:8080", "[::1]", "10.1.2.3:80", "localhost",
                           "LOCALHOST:8080", "localhost.", "app.localhost", "mydesk", "x"})
        CHECK(host_allowed(ok, none));
    for (const char* bad : {"attacker.example", "attacker.example:8080", "127.0.0.1.nip.io", "[::1", "evil.com."})
        CHECK_FALSE(host_allowed(bad, none));
    CHECK(host_allowed("desk.corp.example:8080", {"desk.corp.example"}));
    CHECK(host_allowed("Desk.Corp.Example", {"desk.corp.example"}));
    CHECK_FALSE(host_allowed("other.corp.example", {"desk.corp.example"}));
    CHECK(host_allowed("anything.example", {"*"}));
}

TEST_CASE("body type: only application/json (with parameters) is JSON", "[server]") {
    CHECK(body_type("application/json") == BodyType::kJson);
    CHECK(body_type("Application/JSON; charset=utf-8") == BodyType::kJson);
    CHECK(body_type("") == BodyType::kMissing);
    CHECK(body_type("text/plain") == BodyType::kOther);
    CHECK(body_type("application/x-www-form-urlencoded") == BodyType::kOther);
    CHECK(body_type("application/jsonx") == BodyType::kOther);
}

TEST_CASE("cors: off without origins, the origin echoed when listed, * for any", "[server]") {
    CHECK_FALSE(cors_allow_origin("http://app.example", {}));
    CHECK(cors_allow_origin("http://app.example", {"http://app.example"}) == "http://app.example");
    CHECK_FALSE(cors_allow_origin("http://evil.example", {"http://app.example"}));
    CHECK(cors_allow_origin("http://evil.example", {"*"}) == "*");
    CHECK_FALSE(cors_allow_origin("", {"*"}));
}

TEST_CASE("usage: token counts of the last usage object", "[server]") {
    const TokenCounts t = usage_in(R"({"choices":[{"text":"\"usage\":{\"prompt_tokens\":99"}],)"
                                   R"("usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}})");
    CHECK(t.prompt == 12);
    CHECK(t.completion == 30);
    CHECK(usage_in(R"({"usage":{"prompt_tokens":3,"total_tokens":3}})").completion == -1);
    CHECK(usage_in("data: [DONE]").prompt == -1);
}

TEST_CASE("access log: one line per record, the client's path escaped", "[server]") {
    AccessRecord r{1764653400123, "127.0.0.1", "POST", "/v1/completions", 200, {5, 16}, 12.34};
    CHECK(access_line(r, LogFormat::kText) ==
          "2025-12-02T05:30:00.123Z 127.0.0.1 POST /v1/completions 200 tokens=5/16 12.3ms\n");
    CHECK(access_line(r, LogFormat::kJson) ==
          R"({"time":"2025-12-02T05:30:00.123Z","client":"127.0.0.1","method":"POST","path":"/v1/completions",)"
          R"("status":200,"prompt_tokens":5,"completion_tokens":16,"ms":12.3})"
          "\n");
    r.path = "/a b\nforged 200";
    r.tokens = {};
    CHECK(access_line(r, LogFormat::kText) ==
          "2025-12-02T05:30:00.123Z 127.0.0.1 POST /a%20b%0Aforged%20200 200 tokens=-/- 12.3ms\n");
}

TEST_CASE("metrics: unknown routes count as other, labels are escaped", "[server]") {
    Metrics m;
    m.add_route("/v1/completions");
    m.count_request("/v1/completions", 200);
    for (int i = 0; i < 100; ++i) m.count_request("/v1/x" + std::to_string(i), 401);
    m.count_request("/x\"} 1\ndeskside_forged{a=\"", 401);
    const std::string text = m.render();
    CHECK(text.find("deskside_requests_total{route=\"/v1/completions\",status=\"200\"} 1\n") != std::string::npos);
    CHECK(text.find("deskside_requests_total{route=\"other\",status=\"401\"} 101\n") != std::string::npos);
    CHECK(text.find("forged") == std::string::npos);
    CHECK(escape_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
}
