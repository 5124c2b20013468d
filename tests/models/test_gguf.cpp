// GGUF reader and writer against llama.cpp's own files under ../shared/models.
#include <algorithm>
#include <cmath>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/model.h"
#include "support/paths.h"
#include "support/process.h"

namespace fs = std::filesystem;
using deskside::models::GgufError;
using deskside::models::GgufFile;
using deskside::models::GgufType;
using deskside::models::GgufValue;
using deskside::models::GgufWriter;
using deskside::test::run_deskside;
using deskside::test::shared_path;

namespace {

std::vector<std::string> shared_gguf_files() {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(shared_path("models"))) {
        if (e.is_regular_file() && e.path().extension() == ".gguf") out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string temp_path(const std::string& name) { return (fs::temp_directory_path() / ("deskside-" + name)).string(); }

void write_file(const std::string& path, const uint8_t* data, size_t n) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
}

// Copies every metadata entry and tensor of `f` into a writer, in file order.
GgufWriter copy_of(const GgufFile& f) {
    GgufWriter w;
    for (const auto& [k, v] : f.metadata()) w.set(k, v);
    for (const auto& t : f.tensors()) w.add_tensor(t.name, t.type, t.shape, {t.data, t.n_bytes});
    return w;
}

// Walks a well-formed GGUF header by the spec and returns the first and last byte of each field.
std::vector<size_t> header_field_bytes(const std::vector<uint8_t>& b) {
    std::vector<size_t> out;
    size_t pos = 0;
    auto field = [&](size_t n) {
        out.push_back(pos);
        out.push_back(pos + n - 1);
        pos += n;
    };
    auto u64_at = [&](size_t at) {
        uint64_t v;
        std::memcpy(&v, b.data() + at, 8);
        return v;
    };
    auto u32_at = [&](size_t at) {
        uint32_t v;
        std::memcpy(&v, b.data() + at, 4);
        return v;
    };
    auto string = [&] {
        const uint64_t n = u64_at(pos);
        field(8);
        if (n > 0) field(n);
    };
    const size_t fixed[] = {4, 4, 8, 8};
    for (size_t n : fixed) field(n);
    const uint64_t n_tensors = u64_at(8), n_kv = u64_at(16);
    const size_t scalar_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    for (uint64_t i = 0; i < n_kv; ++i) {
        string();
        const uint32_t type = u32_at(pos);
        field(4);
        if (type == 8) {
            string();
        } else if (type == 9) {
            const uint32_t elem = u32_at(pos);
            field(4);
            const uint64_t count = u64_at(pos);
            field(8);
            for (uint64_t k = 0; k < count; ++k) {
                const size_t before = out.size();
                if (elem == 8) string();
                else field(scalar_size[elem]);
                if (k > 0) out.resize(before);  // only the first element's bytes are targets
            }
        } else {
            field(scalar_size[type]);
        }
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
        string();
        const uint32_t n_dims = u32_at(pos);
        field(4);
        for (uint32_t d = 0; d < n_dims; ++d) field(8);
        field(4);  // type
        field(8);  // offset
    }
    return out;
}

}  // namespace

TEST_CASE("every GGUF under shared/models parses", "[gguf]") {
    const auto files = shared_gguf_files();
    REQUIRE(files.size() >= 30);
    for (const std::string& path : files) {
        INFO(path);
        const GgufFile f = GgufFile::open(path);
        CHECK((f.version() == 2 || f.version() == 3));
        CHECK(f.find("tokenizer.ggml.model") != nullptr);
        for (const auto& t : f.tensors()) {
            CHECK(t.data != nullptr);
            CHECK(t.offset + t.n_bytes <= f.file_size() - f.data_offset());
        }
    }
}

TEST_CASE("stories260K metadata and tensors as llama.cpp wrote them", "[gguf]") {
    const GgufFile f = GgufFile::open(shared_path("models/stories260K.gguf"));
    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.get_int("llama.block_count", 0) == 5);
    CHECK(f.get_int("llama.embedding_length", 0) == 64);
    CHECK(f.get_int("llama.attention.head_count", 0) == 8);
    CHECK(f.get_int("llama.attention.head_count_kv", 0) == 4);
    CHECK(f.find("tokenizer.ggml.tokens")->as_array().items.size() == 512);
    CHECK(f.find("tokenizer.ggml.tokens")->as_array().items[1].as_string() == "<s>");
    REQUIRE(f.tensors().size() == 48);
    const auto* emb = f.find_tensor("token_embd.weight");
    REQUIRE(emb != nullptr);
    CHECK(emb->shape == std::vector<int64_t>{64, 512});
    CHECK(emb->n_bytes == 64 * 512 * 4);
    // A view into the mapping: the first float of the embedding matches the file bytes.
    const auto bytes = read_bytes(shared_path("models/stories260K.gguf"));
    CHECK(std::memcmp(emb->data, bytes.data() + f.data_offset() + emb->offset, emb->n_bytes) == 0);
    // Typed look-ups name the key when the type is wrong.
    CHECK_THROWS_WITH(f.get_int("general.architecture", 0), Catch::Contains("general.architecture"));
}

TEST_CASE("inspect --json reports stories260K's shape", "[gguf][cli]") {
    const auto r = run_deskside({"inspect", shared_path("models/stories260K.gguf"), "--json"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["architecture"] == "llama");
    CHECK(j["hparams"]["n_layer"] == 5);
    CHECK(j["hparams"]["n_embd"] == 64);
    CHECK(j["hparams"]["n_head"] == 8);
    CHECK(j["hparams"]["n_head_kv"] == 4);
    CHECK(j["hparams"]["n_vocab"] == 512);
    CHECK(j["n_tensors"] == 48);
    CHECK(j["types"].size() == 1);
    CHECK(j["types"]["f32"]["tensors"] == 48);
    CHECK(j["tokenizer"]["kind"] == "llama");
    CHECK(j["tokenizer"]["bos"] == 1);
}

TEST_CASE("inspect works on every shared GGUF including vocab-only files", "[gguf][cli]") {
    for (const std::string& path : shared_gguf_files()) {
        INFO(path);
        const auto r = run_deskside({"inspect", path, "--json"});
        REQUIRE(r.exit_code == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["tokenizer"]["n_vocab"].get<int64_t>() > 0);
        const auto t = run_deskside({"inspect", path});
        CHECK(t.exit_code == 0);
        CHECK(t.out.find("tokenizer:") != std::string::npos);
    }
}

TEST_CASE("writer round-trips real files bit-exactly", "[gguf]") {
    for (const char* name : {"models/stories260K.gguf", "models/synth-k-q4_k_m.gguf", "models/vocab/ggml-vocab-qwen2.gguf"}) {
        INFO(name);
        const auto original_bytes = read_bytes(shared_path(name));
        const GgufFile original = GgufFile::open(shared_path(name));
        const std::vector<uint8_t> written = copy_of(original).to_bytes();
        const GgufFile back = GgufFile::parse(written, "written");
        REQUIRE(back.metadata().size() == original.metadata().size());
        for (size_t i = 0; i < back.metadata().size(); ++i) {
            CHECK(back.metadata()[i].first == original.metadata()[i].first);
            CHECK(back.metadata()[i].second.summary(1 << 20) == original.metadata()[i].second.summary(1 << 20));
            CHECK(back.metadata()[i].second.type == original.metadata()[i].second.type);
        }
        REQUIRE(back.tensors().size() == original.tensors().size());
        for (size_t i = 0; i < back.tensors().size(); ++i) {
            const auto& a = original.tensors()[i];
            const auto& b = back.tensors()[i];
            CHECK(a.name == b.name);
            CHECK(a.type == b.type);
            CHECK(a.shape == b.shape);
            REQUIRE(a.n_bytes == b.n_bytes);
            CHECK(std::memcmp(a.data, b.data, a.n_bytes) == 0);
        }
        // llama.cpp packs tensors the same way, so the whole file comes out identical.
        if (original.version() == 3 && original.alignment() == GgufFile::kDefaultAlignment) {
            CHECK(written == original_bytes);
        }
    }
}

TEST_CASE("writer writes every metadata type, nested arrays and alignment", "[gguf]") {
    GgufWriter w;
    w.set("general.alignment", GgufValue::u32(64));
    w.set("u8", {GgufType::U8, uint64_t{200}});
    w.set("i8", {GgufType::I8, int64_t{-100}});
    w.set("u16", {GgufType::U16, uint64_t{60000}});
    w.set("i16", {GgufType::I16, int64_t{-30000}});
    w.set("u32", GgufValue::u32(4000000000u));
    w.set("i32", GgufValue::i32(-2000000000));
    w.set("u64", GgufValue::u64(1ull << 60));
    w.set("i64", {GgufType::I64, int64_t{-(1ll << 60)}});
    w.set("f32", GgufValue::f32(0.5f));
    w.set("f64", {GgufType::F64, 1e300});
    w.set("bool", GgufValue::boolean(true));
    w.set("str", GgufValue::string("héllo\nworld"));
    w.set("nested", GgufValue::array(GgufType::ARRAY, {GgufValue::array(GgufType::I32, {GgufValue::i32(1), GgufValue::i32(2)}),
                                                       GgufValue::array(GgufType::I32, {})}));
    const std::vector<float> data(96, 1.5f);
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(data.data()), data.size() * 4);
    w.add_tensor("a", deskside::quant::TypeId::F32, {3}, bytes.subspan(0, 12));
    w.add_tensor("b", deskside::quant::TypeId::F32, {32, 3}, bytes);
    const auto out = w.to_bytes();
    const GgufFile f = GgufFile::parse(out, "mem");
    CHECK(f.alignment() == 64);
    CHECK(f.data_offset() % 64 == 0);
    CHECK(f.get_int("u8", 0) == 200);
    CHECK(f.get_int("i8", 0) == -100);
    CHECK(f.get_int("i16", 0) == -30000);
    CHECK(f.get_int("u32", 0) == 4000000000ll);
    CHECK(f.get_int("i64", 0) == -(1ll << 60));
    CHECK(f.get_float("f32", 0) == 0.5);
    CHECK(f.get_float("f64", 0) == 1e300);
    CHECK(f.get_bool("bool", false));
    CHECK(f.get_string("str") == "héllo\nworld");
    CHECK(f.find("nested")->as_array().items[0].as_array().items[1].as_int() == 2);
    CHECK(f.find_tensor("b")->offset % 64 == 0);
    CHECK(f.find_tensor("b")->shape == std::vector<int64_t>{32, 3});
    // Bad input to the writer is refused, naming the tensor.
    CHECK_THROWS_WITH(w.add_tensor("c", deskside::quant::TypeId::Q4_0, {33}, bytes), Catch::Contains("'c'"));
    CHECK_THROWS_WITH(w.add_tensor("a", deskside::quant::TypeId::F32, {3}, bytes.subspan(0, 12)), Catch::Contains("duplicate"));
}

TEST_CASE("the reader survives every truncation and byte flip of the header", "[gguf][robustness]") {
    auto bytes = read_bytes(shared_path("models/stories260K.gguf"));
    const size_t header_end = GgufFile::parse(bytes, "x").data_offset();
    REQUIRE(header_end > 1000);
    for (size_t n = 0; n < header_end; ++n) {
        try {
            (void)GgufFile::parse(std::span(bytes.data(), n), "truncated");
            FAIL("truncation at " << n << " was accepted");
        } catch (const GgufError& e) {
            const std::string msg = e.what();
            if (msg.find("byte offset") == std::string::npos) FAIL("no offset in: " << msg);
        }
    }
    // Mutations either parse (a changed value may still be valid) or throw GgufError; the
    // sanitizer build turns any out-of-bounds read into a failure.
    size_t accepted = 0, rejected = 0;
    for (size_t i = 0; i < header_end; ++i) {
        const uint8_t saved = bytes[i];
        for (uint8_t m : {uint8_t(saved ^ 0xFF), uint8_t(saved ^ 0x01)}) {
            bytes[i] = m;
            try {
                (void)GgufFile::parse(bytes, "mutated");
                ++accepted;
            } catch (const GgufError&) {
                ++rejected;
            }
        }
        bytes[i] = saved;
    }
    CHECK(rejected > 0);
    CHECK(accepted > 0);
}

TEST_CASE("deskside inspect exits 1 with a clear message on every truncated header", "[gguf][cli][robustness]") {
    const auto bytes = read_bytes(shared_path("models/stories260K.gguf"));
    const size_t header_end = GgufFile::parse(bytes, "x").data_offset();
    // Every offset of the fixed header and the first key/values, then about 256 more spread over
    // the rest with an odd stride (so every field alignment is hit): the in-process test above
    // covers every truncation; this one checks what the CLI makes of them. Spread over a few
    // threads (each process is cheap; starting one under the sanitizers is not: every third
    // offset took six minutes of CI).
    std::vector<size_t> cuts;
    const size_t stride = std::max<size_t>(3, (header_end - 256) / 256) | 1;
    for (size_t n = 0; n < header_end; n += n < 256 ? 1 : stride) cuts.push_back(n);
    cuts.push_back(header_end - 1);
    constexpr size_t kThreads = 4;
    std::vector<std::string> failures(kThreads);
    std::vector<std::thread> threads;
    for (size_t k = 0; k < kThreads; ++k) {
        threads.emplace_back([&, k] {
            const std::string path = temp_path("truncated-" + std::to_string(k) + ".gguf");
            for (size_t i = k; i < cuts.size() && failures[k].empty(); i += kThreads) {
                const size_t n = cuts[i];
                write_file(path, bytes.data(), n);
                const auto r = run_deskside({"inspect", path});
                if (r.signaled || r.exit_code != 1 || r.err.find(path) == std::string::npos ||
                    r.err.find("byte offset") == std::string::npos) {
                    failures[k] = "truncated at " + std::to_string(n) + ": exit " + std::to_string(r.exit_code) +
                                  " signal " + std::to_string(r.signal) + " stderr: " + r.err;
                }
            }
            fs::remove(path);
        });
    }
    for (auto& t : threads) t.join();
    for (const std::string& f : failures) CHECK(f == "");
}

TEST_CASE("deskside inspect exits cleanly when header fields are corrupted", "[gguf][cli][robustness]") {
    auto bytes = read_bytes(shared_path("models/stories260K.gguf"));
    const GgufFile f = GgufFile::parse(bytes, "x");
    // The first and last byte of every header field (for arrays: their type and count, and the
    // first element), found by walking the layout of the GGUF spec independently of the reader.
    const std::vector<size_t> all_offsets = header_field_bytes(bytes);
    REQUIRE(all_offsets.size() > 48 * 10);
    // One flip (all bits) at every third of those offsets, spread over a few threads: the
    // in-process test above already tries two flips of every header byte; this one checks what
    // the CLI makes of them (every offset took close to two minutes of CI under the sanitizers).
    std::vector<size_t> offsets;
    for (size_t i = 0; i < all_offsets.size(); i += 3) offsets.push_back(all_offsets[i]);
    constexpr size_t kThreads = 4;
    std::vector<std::string> failures(kThreads);
    std::vector<size_t> errors(kThreads, 0);
    std::vector<std::thread> threads;
    for (size_t k = 0; k < kThreads; ++k) {
        threads.emplace_back([&, k] {
            std::vector<uint8_t> mine = bytes;
            const std::string path = temp_path("flipped-" + std::to_string(k) + ".gguf");
            for (size_t i = k; i < offsets.size() && failures[k].empty(); i += kThreads) {
                const size_t at = offsets[i];
                mine[at] ^= 0xFF;
                write_file(path, mine.data(), mine.size());
                mine[at] ^= 0xFF;
                const auto r = run_deskside({"inspect", path, "--json"});
                const bool clean = !r.signaled && (r.exit_code == 0 || r.exit_code == 1) &&
                                   (r.exit_code == 0 || r.err.find(path) != std::string::npos);
                if (!clean) {
                    failures[k] = "offset " + std::to_string(at) + ": exit " + std::to_string(r.exit_code) +
                                  " signal " + std::to_string(r.signal) + " stderr: " + r.err;
                }
                if (r.exit_code == 1) ++errors[k];
            }
            fs::remove(path);
        });
    }
    for (auto& t : threads) t.join();
    for (const std::string& f : failures) CHECK(f == "");
    size_t clean_errors = 0;
    for (size_t e : errors) clean_errors += e;
    const std::string path = temp_path("flipped.gguf");
    CHECK(clean_errors > offsets.size() / 4);
    // The fixed header fields are always fatal and named.
    bytes[0] ^= 0xFF;
    write_file(path, bytes.data(), bytes.size());
    CHECK_THAT(run_deskside({"inspect", path}).err, Catch::Contains("bad magic") && Catch::Contains("byte offset 0"));
    bytes[0] ^= 0xFF;
    bytes[4] = 9;
    write_file(path, bytes.data(), bytes.size());
    CHECK_THAT(run_deskside({"inspect", path}).err, Catch::Contains("version 9"));
    fs::remove(path);
}

namespace {

// stories260K with metadata entries replaced (or added), written to a temporary file.
std::string stories_with(const std::string& name, const std::vector<std::pair<std::string, GgufValue>>& changes) {
    const GgufFile f = GgufFile::open(shared_path("models/stories260K.gguf"));
    GgufWriter w = copy_of(f);
    for (const auto& [key, value] : changes) w.set(key, value);
    const std::string path = temp_path(name + ".gguf");
    w.write(path);
    return path;
}

// The tokenizer arrays of stories260K grown by `extra` tokens, as a consistent vocabulary.
std::vector<std::pair<std::string, GgufValue>> larger_vocabulary(size_t extra) {
    const GgufFile f = GgufFile::open(shared_path("models/stories260K.gguf"));
    std::vector<std::pair<std::string, GgufValue>> out;
    for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
        GgufValue v = *f.find(key);
        auto& items = std::get<deskside::models::GgufArray>(v.value).items;
        for (size_t i = 0; i < extra; ++i) {
            GgufValue item = items.back();
            if (item.type == GgufType::STRING) item.value = "<extra" + std::to_string(i) + ">";
            items.push_back(item);
        }
        out.emplace_back(key, v);
    }
    return out;
}

}  // namespace

TEST_CASE("hostile hyper-parameters are refused at load, naming the field and the file", "[gguf][robustness]") {
    const auto u32 = [](uint64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
    const auto per_layer = [](std::vector<uint32_t> values) {
        std::vector<GgufValue> items;
        for (uint32_t v : values) items.push_back(GgufValue::u32(v));
        return GgufValue::array(GgufType::U32, items);
    };
    struct Case {
        std::string key;
        GgufValue value;
        std::string names;  // the message must contain this
    };
    const std::vector<Case> cases = {
        {"llama.block_count", u32(0), "llama.block_count"},
        {"llama.block_count", u32(0xFFFFFFFF), "llama.block_count"},
        {"llama.block_count", u32(4), "llama.block_count"},  // blk.4.* exists
        {"llama.block_count", u32(6), "llama.block_count"},  // no blk.5.*
        {"llama.embedding_length", u32(0), "llama.embedding_length"},
        {"llama.embedding_length", u32(65), "llama.embedding_length"},
        {"llama.embedding_length", u32(0x80000000u), "llama.embedding_length"},
        {"llama.attention.head_count", u32(0), "llama.attention.head_count"},
        {"llama.attention.head_count", u32(16), "llama.rope.dimension_count"},  // head size 4 < 8 rotated
        {"llama.attention.head_count_kv", u32(0), "llama.attention.head_count_kv"},
        {"llama.attention.head_count_kv", u32(3), "llama.attention.head_count_kv"},
        {"llama.attention.head_count_kv", u32(16), "llama.attention.head_count_kv"},
        {"llama.attention.head_count_kv", per_layer({4, 4}), "llama.attention.head_count_kv"},
        {"llama.attention.key_length", u32(1 << 24), "llama.attention.key_length"},
        {"llama.attention.key_length", u32(0), "llama.attention.key_length"},
        {"llama.feed_forward_length", GgufValue::u64(uint64_t{1} << 40), "llama.feed_forward_length"},
        {"llama.feed_forward_length", u32(173), "llama.feed_forward_length"},
        {"llama.context_length", u32(0), "llama.context_length"},
        {"llama.expert_count", u32(1 << 20), "llama.expert_count"},
        {"llama.expert_used_count", u32(5), "llama.expert_used_count"},
        {"llama.rope.dimension_count", u32(7), "llama.rope.dimension_count"},
        {"llama.attention.layer_norm_rms_epsilon", GgufValue::f32(std::nanf("")),
         "llama.attention.layer_norm_rms_epsilon"},
        {"llama.rope.freq_base", GgufValue::f32(0), "llama.rope.freq_base"},
        {"llama.rope.freq_base", GgufValue::f32(-1), "llama.rope.freq_base"},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        INFO(c.key << " = " << c.value.summary());
        const std::string path = stories_with("hostile-" + std::to_string(i), {{c.key, c.value}});
        CHECK_THROWS_WITH(deskside::models::load_model(path), Catch::Contains(c.names) && Catch::Contains(path));
        fs::remove(path);
    }
    // Experts used beyond the experts there are.
    const std::string moe =
        stories_with("hostile-experts", {{"llama.expert_count", u32(8)}, {"llama.expert_used_count", u32(9)}});
    CHECK_THROWS_WITH(deskside::models::load_model(moe), Catch::Contains("llama.expert_used_count"));
    fs::remove(moe);
}

TEST_CASE("a vocabulary larger than the embedding table is refused at load", "[gguf][robustness]") {
    const std::string path = stories_with("vocab-600", larger_vocabulary(88));
    CHECK_THROWS_WITH(deskside::models::load_model(path),
                      Catch::Contains("600 tokens") && Catch::Contains("token_embd.weight") &&
                          Catch::Contains("512 rows"));
    const auto r = run_deskside({"generate", "-m", path, "-p", "hi", "-n", "2"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("token_embd.weight"));
    fs::remove(path);
    const deskside::models::ModelInfo ok = deskside::models::load_model(shared_path("models/stories260K.gguf"));
    CHECK(ok.embedding_rows() == 512);
}

TEST_CASE("deskside names the field of a hostile block_count instead of a usage error or bad_alloc",
          "[gguf][cli][robustness]") {
    for (uint32_t n : {0u, 0xFFFFFFFFu}) {
        INFO(n);
        const std::string path =
            stories_with("blocks-" + std::to_string(n), {{"llama.block_count", GgufValue::u32(n)}});
        for (const std::vector<std::string>& args :
             {std::vector<std::string>{"generate", "-m", path, "-p", "hi", "-n", "2"}, {"inspect", path}}) {
            const auto r = run_deskside(args);
            CHECK(r.exit_code == 1);
            CHECK_THAT(r.err, Catch::Contains("llama.block_count") && Catch::Contains(path));
            CHECK_THAT(r.err, !Catch::Contains("--help") && !Catch::Contains("bad_alloc"));
        }
        fs::remove(path);
    }
}
