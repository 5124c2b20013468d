// `deskside bench` in batched mode (-npp / -ntg / -npl, as llama-batched-bench): argument handling
// and the consistency of its report. Throughput itself is never checked (it depends on the machine
// and its load): only that each case is there, with llama-batched-bench's KV count, and that every
// rate is its tokens over its time.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/paths.h"
#include "support/process.h"

namespace deskside::test {
namespace {

const std::string kModel = shared_path("models/stories260K.gguf");

bool mentions(const ProcessResult& r, const std::string& text) { return r.err.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("deskside bench batched mode rejects bad lists and mixed modes", "[bench]") {
    const struct {
        std::vector<std::string> flags;
        std::string message;
    } cases[] = {
        {{"-npl", "1,0"}, "-npl: '0' is not an integer"},
        {{"-npp", "8,x"}, "-npp: 'x'"},
        {{"-ntg", "4,"}, "-ntg: ''"},
        {{"--parallel", "2x"}, "'2x'"},
        {{"-npl", "2", "-p", "8"}, "do not apply to the batched mode"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> args{"bench", "-m", kModel};
        args.insert(args.end(), c.flags.begin(), c.flags.end());
        const ProcessResult r = run_deskside(args);
        INFO(c.flags[0] << " " << c.flags[1] << ": " << r.err);
        CHECK(r.exit_code == 2);
        CHECK(mentions(r, c.message));
    }
}

TEST_CASE("deskside bench -npl --json reports every (pp, tg, pl) case", "[bench]") {
    const ProcessResult r =
        run_deskside({"bench", "-m", kModel, "-npp", "8,5", "-ntg", "3", "-npl", "1,4", "-t", "1", "--json"});
    REQUIRE(r.exit_code == 0);
    const nlohmann::json out = nlohmann::json::parse(r.out);
    REQUIRE(out.is_array());
    REQUIRE(out.size() == 4);
    // llama-batched-bench's loop order: pp outermost, then tg, then pl.
    const long long expected[4][2] = {{8, 1}, {8, 4}, {5, 1}, {5, 4}};
    for (size_t i = 0; i < out.size(); ++i) {
        const nlohmann::json& c = out[i];
        const long long pp = expected[i][0], pl = expected[i][1], tg = 3;
        CHECK(c.at("pp") == pp);
        CHECK(c.at("tg") == tg);
        CHECK(c.at("pl") == pl);
        CHECK(c.at("n_kv") == pl * (pp + tg));
        CHECK(c.at("n_threads") == 1);
        const double t_pp = c.at("t_pp"), t_tg = c.at("t_tg"), t = c.at("t");
        REQUIRE(t_pp > 0);
        REQUIRE(t_tg > 0);
        CHECK(t == Approx(t_pp + t_tg).epsilon(1e-9));
        CHECK(c.at("speed_pp").get<double>() == Approx(pl * pp / t_pp).epsilon(1e-9));
        CHECK(c.at("speed_tg").get<double>() == Approx(pl * tg / t_tg).epsilon(1e-9));
        CHECK(c.at("speed").get<double>() == Approx(pl * (pp + tg) / t).epsilon(1e-9));
    }
}

TEST_CASE("deskside bench --parallel prints llama-batched-bench's table", "[bench]") {
    const ProcessResult r = run_deskside({"bench", "-m", kModel, "-npp", "4", "-ntg", "2", "--parallel", "3", "-t", "1"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("|    PP |     TG |    B |   N_KV |") == 0);
    // One row: PP 4, TG 2, B 3, N_KV 18.
    CHECK(r.out.find("|     4 |      2 |    3 |     18 |") != std::string::npos);
}

}  // namespace deskside::test
