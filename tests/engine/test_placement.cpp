// The placement plan (engine/placement.h) on synthetic device lists: no device is opened and
// nothing is allocated. What the plan reserves is checked against real allocations in
// test_split.cpp.
#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

#include "engine/placement.h"
#include "engine/scratch.h"
#include "models/model.h"
#include "support/paths.h"

namespace deskside::engine {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kGiB = 1024 * kMiB;

// A 32-layer model shaped like a 7B Q4 one: 100 MiB per layer, 64 MiB of KV per layer at 4096
// positions (16 KiB per position), a 70 MiB embedding and a 100 MiB head.
MemoryNeeds seven_b() {
    MemoryNeeds n;
    n.n_layer = 32;
    n.layer_weights.assign(32, 100 * kMiB);
    n.kv_per_position = 16 * 1024;
    n.layer_kv = n.kv_per_position * 4096;
    n.embedding = 70 * kMiB;
    n.output = 100 * kMiB;
    n.scratch = 50 * kMiB;
    n.scratch_output = 10 * kMiB;
    n.block_size = 16;
    return n;
}

int64_t layers(const DevicePlan& d) { return d.layer_end - d.layer_begin; }

}  // namespace

TEST_CASE("split ratios: --split parses auto and positive ratios, and names a bad entry", "[engine][placement]") {
    CHECK(parse_split("auto").is_auto());
    CHECK(parse_split("3,1").ratios == std::vector<double>{3, 1});
    CHECK(parse_split("0.6,0.4,1").ratios == std::vector<double>{0.6, 0.4, 1});
    CHECK_THROWS_WITH(parse_split("3,,1"), Catch::Contains("'' is not a positive number"));
    CHECK_THROWS_WITH(parse_split("3,0"), Catch::Contains("'0' is not a positive number"));
    CHECK_THROWS_WITH(parse_split("-1,2"), Catch::Contains("'-1'"));
    CHECK_THROWS_WITH(parse_split("1,x"), Catch::Contains("'x'"));
    CHECK_THROWS_WITH(parse_split("nan"), Catch::Contains("'nan'"));
    CHECK_THROWS(parse_split(""));
}

TEST_CASE("ratios give contiguous layer ranges with the embedding first and the head last", "[engine][placement]") {
    const MemoryNeeds n = seven_b();
    const std::vector<PlanDevice> devs{{"cuda0", 24 * kGiB}, {"cuda1", 24 * kGiB}};
    const Plan p = plan_placement(n, devs, parse_split("3,1"));
    REQUIRE(p.devices.size() == 2);
    const DevicePlan &a = p.devices[0], &b = p.devices[1];
    CHECK(a.layer_begin == 0);
    CHECK(a.layer_end == 24);
    CHECK(b.layer_begin == 24);
    CHECK(b.layer_end == 32);
    CHECK(p.split_text() == "24,8");
    CHECK((a.embedding && !a.output && !b.embedding && b.output));
    CHECK(a.weight_bytes == 24 * 100 * kMiB + 70 * kMiB);
    CHECK(b.weight_bytes == 8 * 100 * kMiB + 100 * kMiB);
    CHECK(a.kv_bytes == 24 * 64 * kMiB);
    CHECK(b.kv_bytes == 8 * 64 * kMiB);
    CHECK(a.scratch_bytes == 50 * kMiB);
    CHECK(b.scratch_bytes == 60 * kMiB);
    CHECK(a.free_memory == 24 * kGiB);
    CHECK(p.fits());
    CHECK_NOTHROW(check_plan(p, n, devs, 1));

    CHECK(plan_placement(n, devs, parse_split("1,1")).split_text() == "16,16");
    // Every device keeps at least one layer, however lopsided the ratios.
    CHECK(plan_placement(n, devs, parse_split("1000,1")).split_text() == "31,1");
    const std::vector<PlanDevice> three{{"a", kGiB}, {"b", kGiB}, {"c", kGiB}};
    CHECK(plan_placement(n, three, parse_split("1,1,1")).split_text() == "11,10,11");
}

TEST_CASE("one device holds everything, a tied head once", "[engine][placement]") {
    MemoryNeeds n = seven_b();
    n.output = 70 * kMiB + 16 * 1024;  // token_embd again + output_norm
    n.tied_head = 70 * kMiB;
    const std::vector<PlanDevice> one{{"cpu", 64 * kGiB}};
    const Plan p = plan_placement(n, one, SplitSpec{});
    REQUIRE(p.devices.size() == 1);
    CHECK(p.devices[0].layer_end == 32);
    CHECK(p.devices[0].weight_bytes == 32 * 100 * kMiB + 70 * kMiB + 16 * 1024);
    // Split, the last device needs its own copy of the head.
    const std::vector<PlanDevice> two{{"vulkan0", 8 * kGiB}, {"cpu", 64 * kGiB}};
    const Plan q = plan_placement(n, two, parse_split("1,1"));
    CHECK(q.devices[1].weight_bytes == 16 * 100 * kMiB + 70 * kMiB + 16 * 1024);
}

TEST_CASE("auto splits by free memory after each device's fixed share", "[engine][placement]") {
    const MemoryNeeds n = seven_b();
    // 4 GiB vs 12 GiB free (after a few hundred MiB of fixed share): about a quarter of the layers.
    const std::vector<PlanDevice> devs{{"vulkan0", 4 * kGiB}, {"vulkan1", 12 * kGiB}};
    const Plan p = plan_placement(n, devs, SplitSpec{});
    CHECK(layers(p.devices[0]) == 8);
    CHECK(layers(p.devices[1]) == 24);
    CHECK(p.fits());
    // Equal devices: an even split.
    const std::vector<PlanDevice> same{{"a", 16 * kGiB}, {"b", 16 * kGiB}};
    CHECK(plan_placement(n, same, SplitSpec{}).split_text() == "16,16");
}

TEST_CASE("a device listed twice shares its free memory", "[engine][placement]") {
    const MemoryNeeds n = seven_b();
    // Each half needs about 2.7 GiB: a 6 GiB pool holds both, a 5 GiB one does not, although
    // each entry reports the whole pool as free.
    const std::vector<PlanDevice> six{{"cpu", 6 * kGiB}, {"cpu", 6 * kGiB}};
    const Plan p = plan_placement(n, six, parse_split("1,1"));
    CHECK(p.devices[0].free_memory == 3 * kGiB);
    CHECK(p.devices[1].free_memory == 3 * kGiB);
    CHECK(p.fits());
    const std::vector<PlanDevice> five{{"cpu", 5 * kGiB}, {"cpu", 5 * kGiB}};
    CHECK_FALSE(plan_placement(n, five, parse_split("1,1")).fits());
    // Different devices each keep their own.
    const std::vector<PlanDevice> two{{"vulkan0", 5 * kGiB}, {"vulkan1", 5 * kGiB}};
    CHECK(plan_placement(n, two, parse_split("1,1")).fits());
}

TEST_CASE("plans that cannot be made are usage errors", "[engine][placement]") {
    const MemoryNeeds n = seven_b();
    const std::vector<PlanDevice> none;
    CHECK_THROWS_WITH(plan_placement(n, none, SplitSpec{}), Catch::Contains("no devices"));
    const std::vector<PlanDevice> two{{"a", kGiB}, {"b", kGiB}};
    CHECK_THROWS_WITH(plan_placement(n, two, parse_split("1,2,3")), Catch::Contains("3 ratios for 2 devices"));
    MemoryNeeds tiny = n;
    tiny.n_layer = 1;
    tiny.layer_weights.resize(1);
    CHECK_THROWS_WITH(plan_placement(tiny, two, SplitSpec{}), Catch::Contains("only 1 layers"));
}

TEST_CASE("a plan that does not fit names the device and the shortfall, and proposes a split", "[engine][placement]") {
    const MemoryNeeds n = seven_b();
    // 1,1 puts 16 layers (16 x 164 MiB + head) on a 2 GiB device.
    const std::vector<PlanDevice> devs{{"vulkan0", 20 * kGiB}, {"vulkan1", 2 * kGiB}};
    const Plan p = plan_placement(n, devs, parse_split("1,1"));
    REQUIRE_FALSE(p.fits());
    CHECK(p.devices[0].fits());
    CHECK_FALSE(p.devices[1].fits());
    const uint64_t need = p.devices[1].total_bytes();
    CHECK(need == 16 * (100 + 64) * kMiB + 100 * kMiB + 60 * kMiB);
    try {
        check_plan(p, n, devs, 1);
        FAIL("check_plan accepted a plan that does not fit");
    } catch (const std::runtime_error& e) {
        const std::string msg = e.what();
        INFO(msg);
        CHECK_THAT(msg, Catch::Contains("device 'vulkan1' (entry 2 of --devices)"));
        CHECK_THAT(msg, Catch::Contains("layers 16-31"));
        CHECK_THAT(msg, Catch::Contains("short by " + format_bytes(need - 2 * kGiB)));
        CHECK_THAT(msg, Catch::Contains("has 2.00 GiB free"));
        // The proposed split must itself fit.
        std::smatch m;
        REQUIRE(std::regex_search(msg, m, std::regex("--split ([0-9]+,[0-9]+)")));
        CHECK(plan_placement(n, devs, parse_split(m[1].str())).fits());
    }
}

TEST_CASE("when no split fits, a context that fits is proposed", "[engine][placement]") {
    const MemoryNeeds n = seven_b();  // 3.3 GiB of weights, 2 GiB of KV at 4096 positions
    const std::vector<PlanDevice> devs{{"vulkan0", 2 * kGiB}, {"vulkan1", 2 * kGiB}};
    const Plan p = plan_placement(n, devs, parse_split("1,1"));
    REQUIRE_FALSE(p.fits());
    REQUIRE_FALSE(plan_placement(n, devs, SplitSpec{}).fits());
    for (int64_t parallel : {1, 4}) {
        try {
            check_plan(p, n, devs, parallel);
            FAIL("check_plan accepted a plan that does not fit");
        } catch (const std::runtime_error& e) {
            const std::string msg = e.what();
            INFO(msg);
            CHECK_THAT(msg, !Catch::Contains("--split"));
            std::smatch m;
            REQUIRE(std::regex_search(msg, m, std::regex("--ctx-size ([0-9]+)")));
            const int64_t ctx = std::stoll(m[1].str());
            CHECK(ctx % 16 == 0);
            // Re-plan with that context (per sequence, `parallel` sequences): it fits, and one
            // more block per sequence would not.
            const auto with_ctx = [&](int64_t c) {
                MemoryNeeds r = n;
                r.layer_kv = n.kv_per_position * static_cast<uint64_t>(c * parallel);
                return plan_placement(r, devs, parse_split("1,1"));
            };
            CHECK(with_ctx(ctx).fits());
            CHECK_FALSE(with_ctx(ctx + 16).fits());
        }
    }
}

TEST_CASE("weights larger than every device: no split or context helps", "[engine][placement]") {
    const MemoryNeeds n = seven_b();
    const std::vector<PlanDevice> devs{{"a", kGiB}, {"b", kGiB}};
    const Plan p = plan_placement(n, devs, SplitSpec{});
    CHECK_THROWS_WITH(check_plan(p, n, devs, 1), Catch::Contains("add a device or use a smaller quantization"));
}

TEST_CASE("memory needs of a real model follow its tensor table and cache settings", "[engine][placement]") {
    const models::ModelInfo info = models::load_model(test::shared_path("models/stories260K.gguf"));
    const models::Hparams& hp = info.hparams;
    KvCacheConfig cache;
    cache.n_positions = 100;  // rounded up to 7 blocks of 16
    const MemoryNeeds n = memory_needs(info, cache, 64);
    REQUIRE(n.n_layer == hp.n_layer);
    // Every tensor lands in exactly one bucket (vectors are F32 in this file, so bytes match).
    uint64_t file_bytes = 0, layer_bytes = 0;
    for (const models::Tensor& t : info.tensors) file_bytes += t.n_bytes;
    for (uint64_t b : n.layer_weights) layer_bytes += b;
    CHECK(layer_bytes + n.embedding + n.output - n.tied_head == file_bytes);
    CHECK(n.tied_head == (info.find("output.weight") ? 0 : info.find("token_embd.weight")->n_bytes));
    for (int64_t il = 0; il < hp.n_layer; ++il) CHECK(n.layer_weights[il] == n.layer_weights[0]);
    // F16 K and V: 2 bytes x (K + V) x n_head_kv x head_dim per position.
    CHECK(n.kv_per_position == 2 * 2 * static_cast<uint64_t>(hp.n_head_kv * hp.head_dim));
    CHECK(n.layer_kv == n.kv_per_position * 112);
    CHECK(n.scratch > 0);
    CHECK(n.scratch_output >= static_cast<uint64_t>(hp.n_vocab) * 32 * sizeof(float));

    models::ModelInfo vocab_only = info;
    vocab_only.hparams.n_layer = 0;
    CHECK_THROWS_AS(memory_needs(vocab_only, cache, 64), std::runtime_error);
    CHECK_THROWS_WITH(memory_needs(vocab_only, cache, 64),
                      Catch::Contains(".block_count is 0") && Catch::Contains("no layers to place"));
}

TEST_CASE("sizes computed from absurd hyper-parameters are an error, not a wrapped product", "[engine][placement]") {
    // Past the load-time checks (models/hparams_check.h) only by building the description by hand:
    // the size arithmetic itself must still refuse rather than wrap.
    const models::ModelInfo info = models::load_model(test::shared_path("models/stories260K.gguf"));
    KvCacheConfig cache;
    models::ModelInfo wide = info;
    wide.hparams.n_head = wide.hparams.n_head_kv = int64_t{1} << 24;
    wide.hparams.head_dim = wide.hparams.head_dim_v = int64_t{1} << 24;
    CHECK_THROWS_WITH(memory_needs(wide, cache, 512), Catch::Contains("KV cache") && Catch::Contains("out of range"));
    CHECK_THROWS_WITH(Scratch::bytes(wide.hparams, 1 << 16, true),
                      Catch::Contains("activation scratch for 65536 tokens") && Catch::Contains("out of range"));
    models::Hparams experts = info.hparams;
    experts.n_expert = 1 << 16;
    experts.n_expert_used = int64_t{1} << 40;
    CHECK_THROWS_WITH(Scratch::bytes(experts, int64_t{1} << 30, false), Catch::Contains("out of range"));
    CHECK(checked_size({3, 5, 7}, "x") == 105);
    CHECK_THROWS_WITH(checked_size({-1, 2}, "a size"), Catch::Contains("a size is out of range (-1 x 2)"));
}

}  // namespace deskside::engine
