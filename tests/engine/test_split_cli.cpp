// --devices / --split through a model-running command (chat reads them via cli/model_flags):
// the split answers exactly as one device does, and bad lists are usage errors.
#include <catch2/catch.hpp>
#include <string>

#include "support/paths.h"
#include "support/process.h"

namespace deskside::engine {
namespace {

test::ProcessResult chat(const std::vector<std::string>& extra) {
    std::vector<std::string> args{"chat", "-m", test::shared_path("models/stories260K.gguf"), "--temp", "0", "-n", "24"};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_deskside(args, "Once upon a time\nThe dog\n");
}

}  // namespace

TEST_CASE("chat on --devices cpu,cpu answers like one cpu", "[engine][split][cli]") {
    const test::ProcessResult one = chat({});
    REQUIRE(one.exit_code == 0);
    for (const char* split : {"1,1", "4,1"}) {
        const test::ProcessResult two = chat({"--devices", "cpu,cpu", "--split", split});
        INFO(split << "\n" << two.err);
        REQUIRE(two.exit_code == 0);
        CHECK(two.out == one.out);
    }
    const test::ProcessResult three = chat({"--devices", "cpu,cpu,cpu"});
    REQUIRE(three.exit_code == 0);
    CHECK(three.out == one.out);
}

TEST_CASE("chat rejects an unknown device and a split that does not match the list", "[engine][split][cli]") {
    const test::ProcessResult unknown = chat({"--devices", "cpu,npu0"});
    CHECK(unknown.exit_code == 2);
    CHECK_THAT(unknown.err, Catch::Contains("unknown device 'npu0'"));
    const test::ProcessResult mismatch = chat({"--devices", "cpu,cpu", "--split", "1"});
    CHECK(mismatch.exit_code == 2);
    CHECK_THAT(mismatch.err, Catch::Contains("--split gives 1 ratios for 2 devices"));
    const test::ProcessResult huge = chat({"--devices", "cpu,cpu", "-c", "2000000000"});
    CHECK(huge.exit_code == 1);
    CHECK_THAT(huge.err, Catch::Contains("short by"));
}

}  // namespace deskside::engine
