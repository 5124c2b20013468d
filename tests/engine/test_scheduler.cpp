// The step planner: decode tokens first, prompt chunks fill the budget in arrival order.
#include <catch2/catch.hpp>

#include "engine/scheduler.h"

using deskside::engine::blocks_to_grow;
using deskside::engine::CachedPrefix;
using deskside::engine::choose_prefix;
using deskside::engine::PrefixChoice;
using deskside::engine::plan_step;
using deskside::engine::SequenceDemand;

TEST_CASE("plan_step gives every decoding sequence one token before any prompt chunk", "[engine-loop]") {
    const std::vector<SequenceDemand> d = {{100, false}, {1, true}, {1, true}, {30, false}};
    const auto plan = plan_step(d, 64);
    CHECK(plan == std::vector<int64_t>{62, 1, 1, 0});
}

TEST_CASE("plan_step chunks a long prompt over several steps", "[engine-loop]") {
    std::vector<SequenceDemand> d = {{1000, false}};
    int64_t total = 0;
    int steps = 0;
    while (d[0].pending > 0) {
        const auto plan = plan_step(d, 256);
        CHECK(plan[0] <= 256);
        d[0].pending -= plan[0];
        total += plan[0];
        ++steps;
    }
    CHECK(total == 1000);
    CHECK(steps == 4);
}

TEST_CASE("plan_step never starves decoding sequences with a small budget", "[engine-loop]") {
    const std::vector<SequenceDemand> d = {{1, true}, {1, true}, {1, true}, {5, false}};
    CHECK(plan_step(d, 2) == std::vector<int64_t>{1, 1, 1, 0});
    CHECK(plan_step({}, 8).empty());
}

TEST_CASE("blocks_to_grow counts new blocks and a partly filled one", "[engine-loop]") {
    CHECK(blocks_to_grow(0, 1, 16) == 1);
    CHECK(blocks_to_grow(0, 16, 16) == 1);
    CHECK(blocks_to_grow(0, 17, 16) == 2);
    CHECK(blocks_to_grow(16, 17, 16) == 1);  // block-aligned: one new block
    CHECK(blocks_to_grow(20, 21, 16) == 1);  // the block of position 20 may be shared (fork): copied
    CHECK(blocks_to_grow(20, 40, 16) == 2);
    CHECK(blocks_to_grow(20, 20, 16) == 0);
}

TEST_CASE("choose_prefix takes the idle sequence with the longest prefix, or forks a longer one", "[engine-loop]") {
    const std::vector<int32_t> empty, a = {1, 2, 3, 4, 5}, b = {1, 2, 9}, c = {1, 2, 3, 4, 5, 6, 7};
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6};
    SECTION("in place") {
        const std::vector<CachedPrefix> s = {{&b, true}, {&a, true}, {&empty, true}};
        const PrefixChoice p = choose_prefix(s, prompt);
        CHECK(p.target == 1);
        CHECK(p.source == -1);
        CHECK(p.reuse == 5);
    }
    SECTION("a running sequence with more of the prompt is forked into the idle one") {
        const std::vector<CachedPrefix> s = {{&c, false}, {&b, true}, {&empty, true}};
        const PrefixChoice p = choose_prefix(s, prompt);
        CHECK(p.target == 1);  // the idle one sharing most: its 2 tokens are replaced by the fork
        CHECK(p.source == 0);
        CHECK(p.reuse == 5);   // the last prompt token is computed again
    }
    SECTION("ties go to the sequence caching the least") {
        const std::vector<int32_t> d = {7, 7, 7, 7}, e = {8};
        const std::vector<CachedPrefix> s = {{&d, true}, {&e, true}};
        CHECK(choose_prefix(s, prompt).target == 1);
    }
    SECTION("nothing idle") {
        const std::vector<CachedPrefix> s = {{&a, false}};
        CHECK(choose_prefix(s, prompt).target == -1);
    }
}
