// GgufFile::parse_header: the header of a file read from a prefix of it (a
// remote file read by ranges) parses to what the whole file gives, asks for
// more while the prefix ends inside the header, and keeps every check of the
// whole-file parse. Checked on llama.cpp's files.
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "support/paths.h"

using deskside::models::GgufError;
using deskside::models::GgufFile;
using deskside::models::GgufNeedMore;
using deskside::test::shared_path;

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void check_same(const GgufFile& header, const GgufFile& whole) {
    CHECK(header.file_size() == whole.file_size());
    CHECK(header.data_offset() == whole.data_offset());
    CHECK(header.version() == whole.version());
    REQUIRE(header.metadata().size() == whole.metadata().size());
    for (size_t i = 0; i < whole.metadata().size(); ++i) {
        CHECK(header.metadata()[i].first == whole.metadata()[i].first);
        CHECK(header.metadata()[i].second.summary(1000000) == whole.metadata()[i].second.summary(1000000));
    }
    REQUIRE(header.tensors().size() == whole.tensors().size());
    for (size_t i = 0; i < whole.tensors().size(); ++i) {
        const auto &a = header.tensors()[i], &b = whole.tensors()[i];
        CHECK(a.name == b.name);
        CHECK(a.type == b.type);
        CHECK(a.shape == b.shape);
        CHECK(a.offset == b.offset);
        CHECK(a.n_bytes == b.n_bytes);
        CHECK(a.data == nullptr);
    }
}

}  // namespace

TEST_CASE(
    "parse_header grows a prefix until the header parses, as the whole "
    "file does",
    "[models][gguf]") {
    for (const char* name : {"stories260K.gguf", "stories260K-q4_0.gguf", "synth-gemma3-q4_k_m.gguf"}) {
        INFO(name);
        const std::vector<uint8_t> bytes = read_bytes(shared_path(std::string("models/") + name));
        REQUIRE(!bytes.empty());
        const GgufFile whole = GgufFile::parse(bytes, name);
        // Following the parser's own requests from an empty prefix reaches the
        // header's end.
        size_t have = 0;
        int rounds = 0;
        while (true) {
            REQUIRE(++rounds < 1000000);
            try {
                const GgufFile header = GgufFile::parse_header(std::span(bytes).first(have), bytes.size(), name);
                check_same(header, whole);
                CHECK(have <= whole.data_offset());
                break;
            } catch (const GgufNeedMore& e) {
                REQUIRE(e.needed > have);
                REQUIRE(e.needed <= whole.data_offset());
                have = e.needed;
            }
        }
        // Any longer prefix, the whole file included, gives the same.
        for (size_t n : {have + 1, size_t(whole.data_offset()), bytes.size()}) {
            if (n > bytes.size()) continue;
            check_same(GgufFile::parse_header(std::span(bytes).first(n), bytes.size(), name), whole);
        }
    }
}

TEST_CASE("parse_header keeps the whole-file checks", "[models][gguf]") {
    const std::vector<uint8_t> bytes = read_bytes(shared_path("models/stories260K-q4_0.gguf"));
    const GgufFile whole = GgufFile::parse(bytes, "f");
    // A file that ends inside its header is truncated, not "need more".
    const size_t cut = whole.data_offset() / 2;
    try {
        GgufFile::parse_header(std::span(bytes).first(cut), cut, "cut");
        FAIL("a truncated header parsed");
    } catch (const GgufNeedMore&) {
        FAIL("a truncated file asked for bytes past its end");
    } catch (const GgufError& e) {
        CHECK_THAT(e.what(), Catch::Contains("truncated") || Catch::Contains("past the end"));
    }
    // Tensors must lie inside the file's size as the server states it.
    CHECK_THROWS_WITH(
        GgufFile::parse_header(std::span(bytes).first(whole.data_offset()), whole.data_offset() + 64, "smaller"),
        Catch::Contains("outside the data section"));
    // Not a GGUF file.
    const std::vector<uint8_t> junk(64, 'x');
    CHECK_THROWS_WITH(GgufFile::parse_header(junk, 1 << 20, "junk"), Catch::Contains("not a GGUF file"));
}
