// `deskside inspect MODEL --devices LIST`: the placement plan, printed before anything is loaded.
// Byte counts are checked against the tensor table that gguf-py-compatible readers report
// (inspect's own "tensors" list) and against the hyperparameters, not against the plan itself.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "support/paths.h"
#include "support/process.h"

namespace deskside::cli {
namespace {

using nlohmann::json;

json inspect_json(const std::vector<std::string>& extra) {
    std::vector<std::string> args{"inspect", test::shared_path("models/stories260K.gguf"), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::ProcessResult r = test::run_deskside(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
}

}  // namespace

TEST_CASE("inspect --devices cpu,cpu --split prints each device's share", "[cli][placement]") {
    const json j = inspect_json({"--devices", "cpu,cpu", "--split", "3,2", "-c", "256", "-np", "2"});
    const json& p = j.at("placement");
    const json& hp = j.at("hparams");
    REQUIRE(p.at("devices").size() == 2);
    const json &a = p.at("devices")[0], &b = p.at("devices")[1];
    CHECK(p.at("layers_per_device") == "3,2");
    CHECK(a.at("layers") == json::array({0, 3}));
    CHECK(b.at("layers") == json::array({3, 5}));
    CHECK(a.at("embedding") == true);
    CHECK(a.at("output") == false);
    CHECK(b.at("output") == true);
    CHECK(p.at("fits") == true);
    CHECK(p.at("error").is_null());

    // Weights: every tensor of the file on exactly one device (this file has its own head).
    uint64_t file_bytes = 0, first_bytes = 0;
    for (const json& t : j.at("tensors")) {
        const std::string name = t.at("name");
        const uint64_t bytes = t.at("bytes");
        file_bytes += bytes;
        const bool first = name == "token_embd.weight" || name.rfind("blk.0.", 0) == 0 || name.rfind("blk.1.", 0) == 0 ||
                           name.rfind("blk.2.", 0) == 0;
        if (first) first_bytes += bytes;
    }
    CHECK(a.at("weight_bytes").get<uint64_t>() == first_bytes);
    CHECK(a.at("weight_bytes").get<uint64_t>() + b.at("weight_bytes").get<uint64_t>() == file_bytes);
    // KV: 2 sequences x 256 positions, F16 K and V of n_head_kv x head_dim per layer.
    const uint64_t per_layer = 2 * 256 * 2 * 2 * hp.at("n_head_kv").get<uint64_t>() * hp.at("head_dim").get<uint64_t>();
    CHECK(p.at("kv_positions") == 512);
    CHECK(a.at("kv_bytes").get<uint64_t>() == 3 * per_layer);
    CHECK(b.at("kv_bytes").get<uint64_t>() == 2 * per_layer);
    // The last device also holds 32 rows of logits.
    CHECK(b.at("scratch_bytes").get<uint64_t>() >= a.at("scratch_bytes").get<uint64_t>() + 32 * 4 * hp.at("n_vocab").get<uint64_t>());
    // One pool of host memory shared by both entries.
    CHECK(a.at("free_bytes") == b.at("free_bytes"));
    CHECK(a.at("total_bytes").get<uint64_t>() ==
          a.at("weight_bytes").get<uint64_t>() + a.at("kv_bytes").get<uint64_t>() + a.at("scratch_bytes").get<uint64_t>());
}

TEST_CASE("inspect --devices text output shows the plan table", "[cli][placement]") {
    const test::ProcessResult r =
        test::run_deskside({"inspect", test::shared_path("models/stories260K.gguf"), "--devices", "cpu,cpu"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("placement:     3,2 layers per device (auto)"));
    CHECK_THAT(r.out, Catch::Contains("embd"));
    CHECK_THAT(r.out, Catch::Contains("output"));
    CHECK_THAT(r.out, !Catch::Contains("DOES NOT FIT"));
    // Without --devices, no plan.
    const test::ProcessResult plain = test::run_deskside({"inspect", test::shared_path("models/stories260K.gguf")});
    CHECK_THAT(plain.out, !Catch::Contains("placement:"));
}

TEST_CASE("inspect --devices: a plan that does not fit exits 1 naming the device and a fitting context", "[cli][placement]") {
    // 10^9 positions of F16 KV: far more than any machine's memory.
    const test::ProcessResult r = test::run_deskside(
        {"inspect", test::shared_path("models/stories260K.gguf"), "--devices", "cpu", "-c", "1000000000"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Catch::Contains("DOES NOT FIT"));
    CHECK_THAT(r.err, Catch::Contains("device 'cpu' (entry 1 of --devices) needs"));
    CHECK_THAT(r.err, Catch::Contains("short by"));
    CHECK_THAT(r.err, Catch::Contains("--ctx-size"));
    const test::ProcessResult j = test::run_deskside(
        {"inspect", test::shared_path("models/stories260K.gguf"), "--devices", "cpu", "-c", "1000000000", "--json"});
    CHECK(j.exit_code == 1);
    const json out = json::parse(j.out);
    CHECK(out.at("placement").at("fits") == false);
    CHECK_THAT(out.at("placement").at("error").get<std::string>(), Catch::Contains("short by"));
}

TEST_CASE("inspect --devices rejects unknown devices and mismatched splits", "[cli][placement]") {
    const std::string model = test::shared_path("models/stories260K.gguf");
    const test::ProcessResult unknown = test::run_deskside({"inspect", model, "--devices", "cpu,tpu7"});
    CHECK(unknown.exit_code == 2);
    CHECK_THAT(unknown.err, Catch::Contains("unknown device 'tpu7'"));
    CHECK_THAT(unknown.err, Catch::Contains("available: cpu"));
    const test::ProcessResult mismatch = test::run_deskside({"inspect", model, "--devices", "cpu", "--split", "1,1"});
    CHECK(mismatch.exit_code == 2);
    CHECK_THAT(mismatch.err, Catch::Contains("--split gives 2 ratios for 1 devices"));
    const test::ProcessResult bad = test::run_deskside({"inspect", model, "--devices", "cpu,cpu", "--split", "1,zero"});
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("'zero' is not a positive number"));
    const test::ProcessResult empty = test::run_deskside({"inspect", model, "--devices", "cpu,,cpu"});
    CHECK(empty.exit_code == 2);
    CHECK_THAT(empty.err, Catch::Contains("has an empty entry"));
    const test::ProcessResult many = test::run_deskside({"inspect", model, "--devices", "cpu,cpu,cpu,cpu,cpu,cpu"});
    CHECK(many.exit_code == 2);
    CHECK_THAT(many.err, Catch::Contains("6 devices but the model has only 5 layers"));
    const test::ProcessResult orphan = test::run_deskside({"inspect", model, "-c", "512"});
    CHECK(orphan.exit_code == 2);
    CHECK_THAT(orphan.err, Catch::Contains("give --devices too"));
}

}  // namespace deskside::cli
