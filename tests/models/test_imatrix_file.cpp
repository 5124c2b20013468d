// Importance-matrix files: the GGUF form against a file llama-imatrix wrote (synth-k.imatrix), the
// legacy .dat form in the layout llama-imatrix's save_imatrix_legacy writes, and malformed files.
// tests/py/test_imatrix.py checks the same file and ours with gguf-py.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "models/gguf_writer.h"
#include "models/imatrix_file.h"
#include "support/paths.h"
#include "support/required.h"

namespace m = deskside::models;
using Catch::Matchers::Contains;

namespace {

std::string temp_file(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("deskside-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::vector<char> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The legacy layout, field by field (llama.cpp tools/imatrix save_imatrix_legacy).
class LegacyBytes {
   public:
    LegacyBytes& i32(int32_t v) { return raw(&v, 4); }
    LegacyBytes& str(const std::string& s) {
        i32(static_cast<int32_t>(s.size()));
        return raw(s.data(), s.size());
    }
    LegacyBytes& floats(const std::vector<float>& v) { return raw(v.data(), v.size() * 4); }
    std::vector<char> bytes;

   private:
    LegacyBytes& raw(const void* p, size_t n) {
        const char* c = static_cast<const char*>(p);
        bytes.insert(bytes.end(), c, c + n);
        return *this;
    }
};

m::Imatrix small_imatrix() {
    m::Imatrix im;
    im.datasets = {"calibration.txt"};
    im.chunk_count = 3;
    im.chunk_size = 64;
    im.entries.push_back({"blk.0.ffn_down_exps.weight", 4, 2, {1, 2, 3, 4, 5, 6, 7, 8}, {10, 0}});
    im.entries.push_back({"blk.0.attn_q.weight", 4, 1, {0.5f, 1.5f, 2.5f, 3.5f}, {192}});
    return im;
}

}  // namespace

TEST_CASE("read_imatrix reads llama-imatrix's GGUF file", "[imatrix]") {
    const std::string path = deskside::test::shared_path("models/synth-k.imatrix");
    if (!deskside::test::model_or_skip(path, "the imatrix reader test", "../shared/models")) return;
    const m::Imatrix im = m::read_imatrix(path);
    REQUIRE(im.entries.size() == 28);
    CHECK(im.chunk_count == 173);
    CHECK(im.chunk_size == 128);
    REQUIRE(im.datasets.size() == 1);
    CHECK_THAT(im.datasets[0], Contains("ppl-text-gpl3.txt"));
    for (const m::ImatrixEntry& e : im.entries) {
        INFO(e.name);
        const bool down = e.name.find("ffn_down") != std::string::npos;
        CHECK(e.n_per_row == (down ? 768 : 256));  // synth-k: embedding 256, FFN 768
        CHECK(e.n_mat == 1);
        CHECK(e.counts == std::vector<float>{173.0f * 128});  // every token of every chunk
        CHECK(e.in_sum2.size() == static_cast<size_t>(e.n_per_row));
    }
    CHECK(im.entries.front().name == "blk.0.attn_k.weight");
    CHECK(im.find("blk.3.ffn_up.weight") != nullptr);
    CHECK(im.find("output.weight") == nullptr);  // llama-imatrix skips it without --process-output
    const std::vector<float> w = m::importance_weights(*im.find("blk.0.attn_q.weight"));
    CHECK(w[0] == im.find("blk.0.attn_q.weight")->in_sum2[0] / 22144.0f);
}

TEST_CASE("write_imatrix reproduces llama-imatrix's file byte for byte", "[imatrix]") {
    const std::string path = deskside::test::shared_path("models/synth-k.imatrix");
    if (!deskside::test::model_or_skip(path, "the imatrix writer test", "../shared/models")) return;
    const std::string out = temp_file("rewritten.imatrix");
    m::write_imatrix(out, m::read_imatrix(path));
    CHECK(read_bytes(out) == read_bytes(path));
    std::filesystem::remove(out);
}

TEST_CASE("write_imatrix then read_imatrix round-trips experts and partial counts", "[imatrix]") {
    const std::string out = temp_file("small.imatrix");
    const m::Imatrix im = small_imatrix();
    m::write_imatrix(out, im);
    const m::Imatrix back = m::read_imatrix(out);
    std::filesystem::remove(out);
    CHECK(back.datasets == im.datasets);
    CHECK(back.chunk_count == 3);
    CHECK(back.chunk_size == 64);
    REQUIRE(back.entries.size() == 2);
    const m::ImatrixEntry& experts = *back.find("blk.0.ffn_down_exps.weight");
    CHECK(experts.n_per_row == 4);
    CHECK(experts.n_mat == 2);
    CHECK(experts.in_sum2 == im.entries[0].in_sum2);
    CHECK(experts.counts == im.entries[0].counts);
    CHECK(m::importance_weights(experts, 0) == std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f});
    CHECK(m::importance_weights(experts, 1) == std::vector<float>{1, 1, 1, 1});  // no token reached expert 1
    CHECK_THROWS_WITH(m::importance_weights(experts, 2), Contains("blk.0.ffn_down_exps.weight"));
    CHECK(back.find("blk.0.attn_q.weight")->in_sum2 == im.entries[1].in_sum2);
}

TEST_CASE("read_imatrix reads the legacy .dat layout", "[imatrix]") {
    LegacyBytes f;
    f.i32(2);
    f.str("blk.0.attn_k.weight").i32(5).i32(4).floats({5, 10, 15, 20});
    f.str("blk.0.attn_q.weight").i32(5).i32(2).floats({2.5f, 7.5f});
    f.i32(5).str("wiki.train.raw");
    const std::string path = temp_file("legacy.dat");
    write_bytes(path, f.bytes);
    const m::Imatrix im = m::read_imatrix(path);
    std::filesystem::remove(path);
    REQUIRE(im.entries.size() == 2);
    CHECK(im.chunk_count == 5);
    CHECK(im.chunk_size == 0);  // the legacy form does not record it
    CHECK(im.datasets == std::vector<std::string>{"wiki.train.raw"});
    const m::ImatrixEntry& k = *im.find("blk.0.attn_k.weight");
    CHECK(k.n_per_row == 4);
    CHECK(k.counts == std::vector<float>{5});
    // llama-quantize divides a legacy entry's values by its call count.
    CHECK(m::importance_weights(k) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("Malformed imatrix files are refused, naming the entry", "[imatrix]") {
    const std::string path = temp_file("bad.imatrix");
    SECTION("legacy file cut short inside an entry's values") {
        LegacyBytes f;
        f.i32(1).str("blk.0.ffn_up.weight").i32(1).i32(4).floats({1, 2, 3});
        write_bytes(path, f.bytes);
        CHECK_THROWS_WITH(m::read_imatrix(path), Contains("blk.0.ffn_up.weight") && Contains("ends at byte"));
    }
    SECTION("legacy entry with a call count of zero") {
        LegacyBytes f;
        f.i32(1).str("blk.1.attn_v.weight").i32(0).i32(2).floats({1, 2});
        write_bytes(path, f.bytes);
        CHECK_THROWS_WITH(m::read_imatrix(path), Contains("blk.1.attn_v.weight") && Contains("count"));
    }
    SECTION("GGUF entry whose counts are all zero") {
        m::Imatrix im = small_imatrix();
        im.entries[1].counts = {0};
        m::write_imatrix(path, im);
        CHECK_THROWS_WITH(m::read_imatrix(path), Contains("blk.0.attn_q.weight") && Contains("every count is 0"));
    }
    SECTION("GGUF entry with more counts than matrices") {
        m::GgufWriter w;
        w.set("general.type", m::GgufValue::string("imatrix"));
        w.set("imatrix.datasets", m::GgufValue::array(m::GgufType::STRING, {}));
        w.set("imatrix.chunk_count", m::GgufValue::u32(1));
        w.set("imatrix.chunk_size", m::GgufValue::u32(8));
        const std::vector<float> sums{1, 2, 3, 4}, counts{8, 8};
        const auto bytes = [](const std::vector<float>& v) {
            return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
        };
        w.add_tensor("blk.2.ffn_gate.weight.in_sum2", deskside::quant::TypeId::F32, {4}, bytes(sums));
        w.add_tensor("blk.2.ffn_gate.weight.counts", deskside::quant::TypeId::F32, {1, 2}, bytes(counts));
        w.write(path);
        CHECK_THROWS_WITH(m::read_imatrix(path), Contains("blk.2.ffn_gate.weight") && Contains("size mismatch"));
    }
    SECTION("GGUF file cut short") {
        m::write_imatrix(path, small_imatrix());
        std::vector<char> bytes = read_bytes(path);
        bytes.resize(bytes.size() - 40);  // into the last entry's data (sorted by name: the experts)
        write_bytes(path, bytes);
        CHECK_THROWS_WITH(m::read_imatrix(path), Contains(path) && Contains("blk.0.ffn_down_exps.weight"));
    }
    SECTION("GGUF without the imatrix keys") {
        m::GgufWriter w;
        w.set("general.type", m::GgufValue::string("model"));
        w.write(path);
        CHECK_THROWS_WITH(m::read_imatrix(path), Contains("imatrix.datasets"));
    }
    std::filesystem::remove(path);
}
