// safetensors reader: hand-built files (layout spelled out in safetensors_test_file.h), one
// test per validation rule. Files written by Python's safetensors package are read in
// tests/py/test_hf_checkpoint.py.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "models/safetensors.h"
#include "models/safetensors_test_file.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using deskside::models::SafetensorsDtype;
using deskside::models::SafetensorsError;
using deskside::models::SafetensorsFile;
using deskside::test::safetensors_bytes;
using deskside::test::safetensors_raw;
using deskside::test::StTensor;

namespace {

std::vector<uint8_t> floats(std::initializer_list<float> v) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), std::data(v), out.size());
    return out;
}

SafetensorsFile parse(const std::vector<uint8_t>& bytes) { return SafetensorsFile::parse(bytes, "t.safetensors"); }

// The header text of a one-tensor file with the given entry fields, and `n_data` data bytes.
std::vector<uint8_t> one_entry(const std::string& entry, size_t n_data) {
    return safetensors_raw("{\"w\":" + entry + "}", std::vector<uint8_t>(n_data, 0));
}

}  // namespace

TEST_CASE("safetensors: tensors, metadata and data read in place", "[hf][safetensors]") {
    const auto bytes = safetensors_bytes(
        {
            StTensor{"b", "F32", {2, 3}, floats({1, 2, 3, 4, 5, 6})},
            StTensor{"a", "BF16", {4}, {}},
            StTensor{"empty", "F16", {0, 8}, {}},
            StTensor{"scalar", "I64", {}, {}},
        },
        {{"format", "pt"}});
    const SafetensorsFile f = parse(bytes);
    REQUIRE(f.metadata().at("format") == "pt");
    REQUIRE(f.tensors().size() == 4);
    CHECK(f.tensors()[0].name == "b");  // header order, not sorted
    CHECK(f.tensors()[1].name == "a");

    const auto* b = f.find("b");
    REQUIRE(b);
    CHECK(b->dtype == SafetensorsDtype::F32);
    CHECK(b->shape == std::vector<int64_t>{2, 3});
    CHECK(b->n_bytes() == 24);
    // A view into the caller's buffer, right after the 8-byte length and the header.
    CHECK(b->data == bytes.data() + f.data_offset());
    float row1[3];
    std::memcpy(row1, b->data + 12, 12);
    CHECK(row1[0] == 4.0f);
    CHECK(row1[2] == 6.0f);

    const auto* a = f.find("a");
    CHECK(a->dtype == SafetensorsDtype::BF16);
    CHECK(a->data == b->data + 24);
    CHECK(f.find("empty")->n_bytes() == 0);
    CHECK(f.find("scalar")->shape.empty());
    CHECK(f.find("scalar")->n_bytes() == 8);
    CHECK(f.find("missing") == nullptr);
    CHECK(f.data_offset() % 8 == 0);
}

TEST_CASE("safetensors: gaps between tensors and an unpadded header are accepted", "[hf][safetensors]") {
    const auto bytes = safetensors_raw(
        R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"y":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
        std::vector<uint8_t>(8, 7), false);
    const SafetensorsFile f = parse(bytes);
    CHECK(f.find("x")->begin == 4);
    CHECK(f.data_offset() == bytes.size() - 8);
}

TEST_CASE("safetensors: opening a file maps it", "[hf][safetensors]") {
    const fs::path p = fs::temp_directory_path() / ("deskside-hf-open-" + std::to_string(::getpid()) + ".safetensors");
    deskside::test::write_bytes(p, safetensors_bytes({StTensor{"w", "F32", {3}, floats({7, 8, 9})}}));
    const SafetensorsFile f = SafetensorsFile::open(p.string());
    float v[3];
    std::memcpy(v, f.find("w")->data, 12);
    CHECK(v[2] == 9.0f);
    CHECK(f.file_size() == fs::file_size(p));
    fs::remove(p);
    CHECK_THROWS_AS(SafetensorsFile::open("/nonexistent/x.safetensors"), SafetensorsError);
}

TEST_CASE("safetensors: malformed files are refused with the field and the offset", "[hf][safetensors]") {
    SECTION("truncated length") {
        CHECK_THROWS_WITH(parse({1, 2, 3}), Contains("t.safetensors: header length at byte offset 0") && Contains("truncated"));
    }
    SECTION("header length past the end") {
        auto bytes = safetensors_bytes({StTensor{"w", "F32", {1}, {}}});
        bytes.resize(20);  // keep the length, cut the header
        CHECK_THROWS_WITH(parse(bytes), Contains("header length at byte offset 0") && Contains("runs past the end"));
    }
    SECTION("header length beyond the limit") {
        std::vector<uint8_t> bytes(16, 0);
        bytes[7] = 0x7f;
        CHECK_THROWS_WITH(parse(bytes), Contains("runs past the end"));
    }
    SECTION("not a JSON object") {
        CHECK_THROWS_WITH(parse(safetensors_raw("[1, 2]", {})), Contains("header JSON at byte offset 8") && Contains("'{'"));
    }
    SECTION("bad JSON names the offset of the error") {
        // `{"w":{"dtype" x` - the parser stops at the 'x' (header byte 14, file byte 22).
        CHECK_THROWS_WITH(parse(safetensors_raw("{\"w\":{\"dtype\" x", {}, false)),
                          Contains("header JSON at byte offset 22: invalid JSON"));
    }
    SECTION("unknown dtype") {
        CHECK_THROWS_WITH(parse(one_entry(R"({"dtype":"Q4","shape":[1],"data_offsets":[0,1]})", 1)),
                          Contains("tensor 'w' at byte offset 9: unknown dtype 'Q4'"));
    }
    SECTION("missing field") {
        CHECK_THROWS_WITH(parse(one_entry(R"({"dtype":"F32","shape":[1]})", 4)), Contains("missing field 'data_offsets'"));
    }
    SECTION("negative or fractional dimension") {
        CHECK_THROWS_WITH(parse(one_entry(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})", 4)),
                          Contains("shape dimension must be a non-negative integer, found -1"));
        CHECK_THROWS_WITH(parse(one_entry(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})", 4)),
                          Contains("shape dimension must be a non-negative integer"));
    }
    SECTION("element count overflow") {
        CHECK_THROWS_WITH(parse(one_entry(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})", 4)),
                          Contains("overflows"));
        CHECK_THROWS_WITH(parse(one_entry(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]})", 4)),
                          Contains("byte size of shape") && Contains("overflows"));
    }
    SECTION("byte count does not match dtype x shape") {
        CHECK_THROWS_WITH(parse(one_entry(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,20]})", 24)),
                          Contains("tensor 'w'") && Contains("dtype F32 x shape [2, 3] needs 24 bytes, but data_offsets [0, 20) hold 20"));
    }
    SECTION("offsets outside the data section") {
        CHECK_THROWS_WITH(parse(one_entry(R"({"dtype":"U8","shape":[8],"data_offsets":[4,12]})", 8)),
                          Contains("tensor 'w'") && Contains("data_offsets [4, 12) lie outside the data section of 8 bytes"));
    }
    SECTION("offsets reversed") {
        CHECK_THROWS_WITH(parse(one_entry(R"({"dtype":"U8","shape":[0],"data_offsets":[4,2]})", 8)), Contains("end before they begin"));
    }
    SECTION("overlapping tensors") {
        const auto bytes = safetensors_raw(
            R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"z":{"dtype":"U8","shape":[0],"data_offsets":[3,3]},)"
            R"("b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
            std::vector<uint8_t>(8, 0));
        CHECK_THROWS_WITH(parse(bytes), Contains("tensor 'b'") && Contains("overlaps tensor 'a' [0, 8)"));
    }
    SECTION("duplicate name") {
        CHECK_THROWS_WITH(parse(safetensors_raw(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                                R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                                {0, 0})),
                          Contains("tensor 'w' at byte offset 9: the name appears twice"));
    }
    SECTION("metadata must hold strings") {
        CHECK_THROWS_WITH(parse(safetensors_raw(R"({"__metadata__":{"format":1}})", {})),
                          Contains("__metadata__.format") && Contains("must be strings"));
    }
    SECTION("entry that is not an object") {
        CHECK_THROWS_WITH(parse(safetensors_raw(R"({"w":[1]})", {})), Contains("tensor 'w'") && Contains("entry must be an object"));
    }
}

TEST_CASE("safetensors: corrupted files parse or throw, and every view stays inside the file", "[hf][safetensors]") {
    const auto good = safetensors_bytes({StTensor{"a.weight", "F32", {4, 2}, {}}, StTensor{"b.bias", "BF16", {3}, {}},
                                         StTensor{"c", "U8", {5}, {}}},
                                        {{"format", "pt"}});
    std::mt19937 rng(1234);  // fixed seed: the same corruptions every run
    int parsed = 0, refused = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::vector<uint8_t> bytes = good;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            const size_t at = rng() % bytes.size();
            switch (rng() % 3) {
                case 0: bytes[at] = static_cast<uint8_t>(rng()); break;           // flip a byte
                case 1: bytes.resize(at); break;                                  // truncate
                case 2: bytes[at] = static_cast<uint8_t>("0123456789[]{}\",:"[rng() % 17]); break;  // JSON-ish noise
            }
            if (bytes.empty()) break;
        }
        try {
            const SafetensorsFile f = parse(bytes);
            for (const auto& t : f.tensors()) {
                REQUIRE(t.data >= bytes.data() + f.data_offset());
                REQUIRE(t.data + t.n_bytes() <= bytes.data() + bytes.size());
            }
            ++parsed;
        } catch (const SafetensorsError&) {
            ++refused;
        }
    }
    CHECK(parsed > 0);
    CHECK(refused > 0);
}
