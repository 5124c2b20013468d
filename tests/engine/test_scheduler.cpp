// The step planner: decode tokens first, prompt chunks fill the budget in arrival order.
#include <catch2/catch.hpp>

#include "engine/scheduler.h"

using deskside::engine::admit_count;
using deskside::engine::plan_step;
using deskside::engine::SequenceDemand;

TEST_CASE("plan_step gives every decoding sequence one token before any prompt chunk", "[server]") {
    const std::vector<SequenceDemand> d = {{100, false}, {1, true}, {1, true}, {30, false}};
    const auto plan = plan_step(d, 64);
    CHECK(plan == std::vector<int64_t>{62, 1, 1, 0});
}

TEST_CASE("plan_step chunks a long prompt over several steps", "[server]") {
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

TEST_CASE("plan_step never starves decoding sequences with a small budget", "[server]") {
    const std::vector<SequenceDemand> d = {{1, true}, {1, true}, {1, true}, {5, false}};
    CHECK(plan_step(d, 2) == std::vector<int64_t>{1, 1, 1, 0});
    CHECK(plan_step({}, 8).empty());
}

TEST_CASE("admit_count fills free slots only", "[server]") {
    CHECK(admit_count(0, 10, 4) == 4);
    CHECK(admit_count(3, 10, 4) == 1);
    CHECK(admit_count(4, 10, 4) == 0);
    CHECK(admit_count(1, 2, 4) == 2);
}
