// `deskside bench`: argument handling and the shape of its report. Throughput itself is never
// checked (timings depend on the machine and its load); only that the numbers it prints agree
// with each other and with the model file.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/process.h"

namespace deskside::test {
namespace {

const std::string kModel = shared_path("models/stories260K.gguf");  // all F32, 292,800 parameters

bool mentions(const ProcessResult& r, const std::string& text) { return r.err.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("deskside bench rejects bad arguments with a usage error", "[bench]") {
    const ProcessResult no_model = run_deskside({"bench"});
    CHECK(no_model.exit_code == 2);
    CHECK(mentions(no_model, "-m MODEL is required"));

    const ProcessResult zero_reps = run_deskside({"bench", "-m", kModel, "-r", "0"});
    CHECK(zero_reps.exit_code == 2);
    CHECK(mentions(zero_reps, "-r must be"));

    const ProcessResult nothing = run_deskside({"bench", "-m", kModel, "-p", "0", "-n", "0"});
    CHECK(nothing.exit_code == 2);
    CHECK(mentions(nothing, "nothing to measure"));

    const ProcessResult negative = run_deskside({"bench", "-m", kModel, "-n", "-3"});
    CHECK(negative.exit_code == 2);
    CHECK(mentions(negative, "-n"));

    const ProcessResult not_a_number = run_deskside({"bench", "-m", kModel, "-p", "lots"});
    CHECK(not_a_number.exit_code == 2);
    CHECK(mentions(not_a_number, "'lots' is not an integer"));

    const ProcessResult unknown = run_deskside({"bench", "-m", kModel, "--flash-attn"});
    CHECK(unknown.exit_code == 2);
    CHECK(mentions(unknown, "--flash-attn"));

    const ProcessResult threads = run_deskside({"bench", "-m", kModel, "-t", "-1"});
    CHECK(threads.exit_code == 2);
    CHECK(mentions(threads, "--threads"));
}

TEST_CASE("deskside bench names a missing model file", "[bench]") {
    const std::string missing = (std::filesystem::temp_directory_path() / "deskside-bench-no-such.gguf").string();
    const ProcessResult r = run_deskside({"bench", "-m", missing, "-p", "4", "-n", "2", "-r", "1"});
    CHECK(r.exit_code == 1);
    CHECK(mentions(r, "deskside-bench-no-such.gguf"));
}

TEST_CASE("deskside bench --json reports each test with its repetitions", "[bench]") {
    const ProcessResult r = run_deskside({"bench", "-m", kModel, "-p", "8", "-n", "4", "-r", "3", "-t", "1", "--json"});
    REQUIRE(r.exit_code == 0);
    const nlohmann::json out = nlohmann::json::parse(r.out);
    REQUIRE(out.is_array());
    REQUIRE(out.size() == 2);
    CHECK(out[0].at("test") == "pp8");
    CHECK(out[0].at("n_prompt") == 8);
    CHECK(out[0].at("n_gen") == 0);
    CHECK(out[1].at("test") == "tg4");
    CHECK(out[1].at("n_prompt") == 0);
    CHECK(out[1].at("n_gen") == 4);
    for (const nlohmann::json& t : out) {
        CHECK(t.at("n_threads") == 1);
        CHECK(t.at("model_type") == "llama F32");
        // The parameter count of the file (gguf-py: 292,800 elements), four bytes each.
        CHECK(t.at("model_n_params") == 292800);
        CHECK(t.at("model_size") == 292800 * 4);
        const auto ts = t.at("samples_ts").get<std::vector<double>>();
        const auto ns = t.at("samples_ns").get<std::vector<long long>>();
        REQUIRE(ts.size() == 3);
        REQUIRE(ns.size() == 3);
        double sum = 0;
        for (size_t i = 0; i < ts.size(); ++i) {
            REQUIRE(ns[i] > 0);
            // Each sample's rate is its tokens over its time.
            const double tokens = t.at("n_prompt").get<double>() + t.at("n_gen").get<double>();
            CHECK(ts[i] == Approx(tokens / (ns[i] * 1e-9)).epsilon(1e-6));
            sum += ts[i];
        }
        CHECK(t.at("avg_ts").get<double>() == Approx(sum / 3).epsilon(1e-9));
        CHECK(t.at("stddev_ts").get<double>() >= 0);
    }
}

TEST_CASE("deskside bench prints a table and skips a test given 0 tokens", "[bench]") {
    const ProcessResult r = run_deskside({"bench", "-m", kModel, "-p", "0", "-n", "3", "-r", "1", "-t", "1"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("| model") == 0);
    CHECK(r.out.find("tg3") != std::string::npos);
    CHECK(r.out.find("pp") == std::string::npos);
    CHECK(r.out.find("±") != std::string::npos);
}

}  // namespace deskside::test
