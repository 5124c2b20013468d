// The stack comparison's classes (engine/stack_compare.h) on fingerprints built here, and the
// fingerprint of this machine (engine/stack_fingerprint.h): every field the comparison reads is
// there, and the CPU level is the one DESKSIDE_CPU_ISA names.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "engine/stack_compare.h"
#include "engine/stack_fingerprint.h"

namespace deskside::engine {
namespace {

using nlohmann::json;

// A fingerprint of a desk with one Vulkan GPU, shaped as stack_fingerprint writes it.
json desk() {
    return json::parse(R"json({
      "schema": 1,
      "deskside": {"version": "0.1.0", "commit": "abc", "dirty": false, "build_type": "Release",
                   "options": {"vulkan": "ON", "cuda": "OFF", "native": "OFF", "sanitize": "OFF",
                               "cuda_architectures": ""}},
      "compiler": {"cxx": "gcc 12.2.0", "cuda": ""},
      "os": {"name": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-18-amd64", "arch": "x86_64", "glibc": "2.36"},
      "isa": "avx2",
      "threads": 8,
      "cpu": {"model": "AMD Ryzen 9 7950X", "isa_best": "avx512", "features": ["avx2", "avx512-vnni"], "cores": 16,
              "memory_bytes": 68719476736, "max_mhz": 5881},
      "devices": [{"name": "vulkan0", "api": "vulkan", "description": "AMD Radeon RX 7900 XTX", "type": "discrete-gpu",
                   "memory_bytes": 25753026560, "usable": true, "driver": "radv: Mesa 24.2.8",
                   "driver_version": "24.2.8", "runtime_version": "1.3.290", "api_version": "1.3.289",
                   "kernels": ["plain", "int8-dot", "storage16", "subgroup-arith", "subgroup=64"],
                   "features": ["fp16", "int8-dot", "subgroup=64", "max-binding=4095MiB"]}],
      "absent": {"cuda": "deskside was built without CUDA"}
    })json");
}

const StackDifference* find(const std::vector<StackDifference>& diffs, const std::string& field) {
    for (const StackDifference& d : diffs)
        if (d.field == field) return &d;
    return nullptr;
}

TEST_CASE("stack_compare: identical fingerprints have no differences", "[env]") {
    const auto diffs = compare_stacks(desk(), desk());
    CHECK(diffs.empty());
    CHECK_FALSE(changes_results(diffs));
}

TEST_CASE("stack_compare: the ISA level changes results", "[env]") {
    json cluster = desk();
    cluster["isa"] = "avx512";
    const auto diffs = compare_stacks(desk(), cluster);
    REQUIRE(diffs.size() == 1);
    CHECK(diffs[0].field == "isa");
    CHECK(diffs[0].kind == ChangeKind::Results);
    CHECK(diffs[0].before == "avx2");
    CHECK(diffs[0].after == "avx512");
    CHECK(changes_results(diffs));
}

TEST_CASE("stack_compare: threads, clocks and memory change only speed", "[env]") {
    json cluster = desk();
    cluster["threads"] = 64;
    cluster["cpu"]["model"] = "AMD EPYC 9654";
    cluster["cpu"]["max_mhz"] = 3700;
    cluster["cpu"]["memory_bytes"] = 824633720832;
    cluster["devices"][0]["memory_bytes"] = 17179869184;
    const auto diffs = compare_stacks(desk(), cluster);
    CHECK(diffs.size() == 5);
    for (const StackDifference& d : diffs) CHECK(d.kind == ChangeKind::Speed);
    CHECK_FALSE(changes_results(diffs));
}

TEST_CASE("stack_compare: kernel variants, drivers, build and model digests change results", "[env]") {
    json cluster = desk();
    cluster["devices"][0]["kernels"][0] = "exact";
    cluster["devices"][0]["driver_version"] = "24.3.1";
    cluster["deskside"]["commit"] = "def";
    cluster["deskside"]["options"]["native"] = "ON";
    cluster["compiler"]["cxx"] = "clang 18.1.8";
    cluster["os"]["glibc"] = "2.39";
    json a = desk(), b = cluster;
    a["model"] = {{"path", "/desk/m.gguf"}, {"sha256", "11"}, {"size_bytes", 10}, {"quant_types", json::array()}};
    b["model"] = {{"path", "/data/m.gguf"}, {"sha256", "22"}, {"size_bytes", 10}, {"quant_types", json::array()}};
    const auto diffs = compare_stacks(a, b);
    for (const char* field : {"devices.vulkan0.kernels", "devices.vulkan0.driver_version", "deskside.commit",
                              "deskside.options.native", "compiler.cxx", "os.glibc", "model.sha256"}) {
        INFO(field);
        const StackDifference* d = find(diffs, field);
        REQUIRE(d != nullptr);
        CHECK(d->kind == ChangeKind::Results);
        CHECK_FALSE(d->why.empty());
    }
    const StackDifference* path = find(diffs, "model.path");
    REQUIRE(path != nullptr);
    CHECK(path->kind == ChangeKind::Cosmetic);
    CHECK(diffs.back().kind == ChangeKind::Cosmetic);  // results first, cosmetic last
    CHECK(changes_results(diffs));
}

TEST_CASE("stack_compare: OS name, kernel and absence reasons are cosmetic", "[env]") {
    json cluster = desk();
    cluster["os"]["name"] = "Ubuntu 24.04.1 LTS";
    cluster["os"]["kernel"] = "6.8.0-45-generic";
    cluster["absent"]["cuda"] = "CUDA: no NVIDIA driver found";
    const auto diffs = compare_stacks(desk(), cluster);
    CHECK(diffs.size() == 3);
    for (const StackDifference& d : diffs) CHECK(d.kind == ChangeKind::Cosmetic);
    CHECK_FALSE(changes_results(diffs));
}

TEST_CASE("stack_compare: devices pair up by name; one on one side only changes results", "[env]") {
    json cluster = desk();
    json second = cluster["devices"][0];
    second["name"] = "vulkan1";
    cluster["devices"] = json::array({second, cluster["devices"][0]});  // order does not matter
    const auto diffs = compare_stacks(desk(), cluster);
    REQUIRE(diffs.size() == 1);
    CHECK(diffs[0].field == "devices.vulkan1");
    CHECK(diffs[0].kind == ChangeKind::Results);
    CHECK(diffs[0].before.is_null());
}

TEST_CASE("stack_compare: a model on one side only and unknown fields fail closed", "[env]") {
    json a = desk(), b = desk();
    b["model"] = {{"sha256", "22"}};
    b["npu"] = {{"firmware", "1.0"}};
    const auto diffs = compare_stacks(a, b);
    REQUIRE(find(diffs, "model") != nullptr);
    CHECK(find(diffs, "model")->kind == ChangeKind::Results);
    REQUIRE(find(diffs, "npu") != nullptr);
    CHECK(find(diffs, "npu")->kind == ChangeKind::Results);
}

TEST_CASE("stack_fingerprint: this machine's fingerprint has every field the comparison reads", "[env]") {
    const json f = stack_fingerprint({});
    for (const char* key : {"schema", "deskside", "compiler", "os", "isa", "threads", "cpu", "devices", "absent"}) {
        INFO(key);
        CHECK(f.contains(key));
    }
    CHECK_FALSE(f.contains("model"));
    CHECK(f["threads"].get<int>() >= 1);
    CHECK(f["cpu"]["memory_bytes"].get<uint64_t>() > 0);
    const char* pinned = std::getenv("DESKSIDE_CPU_ISA");
    if (pinned && *pinned) CHECK(f["isa"] == pinned);
    for (const json& d : f["devices"]) {
        INFO(d.dump());
        CHECK_FALSE(d["kernels"].empty());
        CHECK(d.contains("driver_version"));
    }
    // Gathered twice, a fingerprint compares equal to itself: nothing volatile (free memory) in it.
    CHECK(compare_stacks(f, json(stack_fingerprint({}))).empty());
    FingerprintOptions three;
    three.n_threads = 3;
    CHECK(stack_fingerprint(three)["threads"] == 3);
}

}  // namespace
}  // namespace deskside::engine
