// Every llama.cpp tokenizer test vector: each case of each vocab-only GGUF must tokenize (no
// BOS/EOS, no special-token parsing) to exactly the ids in its .out file, and byte-level BPE
// and SentencePiece vocabularies must decode back to the input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <thread>

#include "models/gguf.h"
#include "models/tokenizer/tokenizer.h"
#include "vocab_cases.h"

namespace deskside::test {
namespace {

// Vocabularies whose tokenizer kind deskside does not implement.
const std::set<std::string> kExcluded = {
    "ggml-vocab-bert-bge",  // WordPiece (BERT): tokenizer.ggml.model "bert" is not supported
};

const std::vector<std::string> kVocabs = {
    "ggml-vocab-llama-spm", "ggml-vocab-phi-3",   "ggml-vocab-llama-bpe",   "ggml-vocab-gpt-2",
    "ggml-vocab-qwen2",     "ggml-vocab-qwen35",  "ggml-vocab-deepseek-llm", "ggml-vocab-deepseek-coder",
    "ggml-vocab-falcon",    "ggml-vocab-mpt",     "ggml-vocab-starcoder",   "ggml-vocab-refact",
    "ggml-vocab-command-r", "ggml-vocab-gemma-4",
};

std::unique_ptr<models::Tokenizer> load_vocab(const std::string& name) {
    return models::Tokenizer::from_gguf(models::GgufFile::open(shared_path("models/vocab/" + name + ".gguf")));
}

std::string ids_string(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += std::to_string(id) + " ";
    return s;
}

void check_vectors(const std::string& name) {
    const auto tok = load_vocab(name);
    const auto cases = read_vocab_cases(name);
    REQUIRE(cases.size() >= 40);
    size_t failures = 0;
    for (const VocabCase& c : cases) {
        const std::vector<int32_t> got = tok->encode(c.text, false, false);
        if (got != c.ids) {
            ++failures;
            UNSCOPED_INFO("case '" << c.text << "'\n  expected " << ids_string(c.ids) << "\n  got      " << ids_string(got));
        }
    }
    CHECK(failures == 0);
}

// decode(encode(x)) == x, without the clean-up of spaces (which Hugging Face also leaves off
// when asked to reproduce the input).
void check_round_trip(const std::string& name) {
    const auto tok = load_vocab(name);
    models::DecodeOptions raw;
    raw.clean_spaces = false;
    size_t failures = 0;
    for (const VocabCase& c : read_vocab_cases(name)) {
        const std::string back = tok->decode(tok->encode(c.text, false, false), raw);
        if (back != c.text) {
            ++failures;
            UNSCOPED_INFO("case '" << c.text << "' decoded to '" << back << "'");
        }
    }
    CHECK(failures == 0);
}

}  // namespace

TEST_CASE("tokenizer: every vocab file is covered or excluded with a reason", "[tokenizer]") {
    std::set<std::string> covered(kVocabs.begin(), kVocabs.end());
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(shared_path("models/vocab"))) {
        const std::string file = e.path().filename().string();
        if (!file.ends_with(".gguf")) continue;
        ++n;
        const std::string name = file.substr(0, file.size() - 5);
        INFO(name);
        CHECK((covered.count(name) + kExcluded.count(name)) == 1);
    }
    CHECK(n == kVocabs.size() + kExcluded.size());
}

TEST_CASE("tokenizer: an excluded vocabulary kind is refused by name", "[tokenizer]") {
    const auto f = models::GgufFile::open(shared_path("models/vocab/ggml-vocab-bert-bge.gguf"));
    CHECK_THROWS_WITH(models::Tokenizer::from_gguf(f), Catch::Contains("bert") && Catch::Contains("not supported"));
}

#define DESKSIDE_VOCAB_TEST(name)                                                                   \
    TEST_CASE("tokenizer: " name " matches llama.cpp's vectors", "[tokenizer]") { check_vectors(name); }
DESKSIDE_VOCAB_TEST("ggml-vocab-llama-spm")
DESKSIDE_VOCAB_TEST("ggml-vocab-phi-3")
DESKSIDE_VOCAB_TEST("ggml-vocab-llama-bpe")
DESKSIDE_VOCAB_TEST("ggml-vocab-gpt-2")
DESKSIDE_VOCAB_TEST("ggml-vocab-qwen2")
DESKSIDE_VOCAB_TEST("ggml-vocab-qwen35")
DESKSIDE_VOCAB_TEST("ggml-vocab-deepseek-llm")
DESKSIDE_VOCAB_TEST("ggml-vocab-deepseek-coder")
DESKSIDE_VOCAB_TEST("ggml-vocab-falcon")
DESKSIDE_VOCAB_TEST("ggml-vocab-mpt")
DESKSIDE_VOCAB_TEST("ggml-vocab-starcoder")
DESKSIDE_VOCAB_TEST("ggml-vocab-refact")
DESKSIDE_VOCAB_TEST("ggml-vocab-command-r")
DESKSIDE_VOCAB_TEST("ggml-vocab-gemma-4")
#undef DESKSIDE_VOCAB_TEST

TEST_CASE("tokenizer: one tokenizer serves several threads at once", "[tokenizer]") {
    // As llama.cpp's test-tokenizer-0 does: every thread tokenizes every case.
    const auto tok = load_vocab("ggml-vocab-qwen2");
    const auto cases = read_vocab_cases("ggml-vocab-qwen2");
    std::vector<size_t> failures(4, 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < failures.size(); ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < 5; ++round) {
                for (const VocabCase& c : cases) failures[t] += tok->encode(c.text, false, false) != c.ids;
            }
        });
    }
    for (auto& th : threads) th.join();
    for (size_t f : failures) CHECK(f == 0);
}

TEST_CASE("tokenizer: byte-level BPE vocabularies decode their vectors back to the input", "[tokenizer]") {
    for (const char* name : {"ggml-vocab-llama-bpe", "ggml-vocab-gpt-2", "ggml-vocab-qwen2", "ggml-vocab-qwen35",
                             "ggml-vocab-deepseek-llm", "ggml-vocab-deepseek-coder", "ggml-vocab-falcon",
                             "ggml-vocab-mpt", "ggml-vocab-starcoder", "ggml-vocab-refact", "ggml-vocab-command-r"}) {
        SECTION(name) { check_round_trip(name); }
    }
}

TEST_CASE("tokenizer: SentencePiece-style vocabularies decode their vectors back to the input", "[tokenizer]") {
    // Without BOS the first piece loses the space the encoder prefixed (llama.cpp's rule).
    for (const char* name : {"ggml-vocab-llama-spm", "ggml-vocab-phi-3", "ggml-vocab-gemma-4"}) {
        SECTION(name) { check_round_trip(name); }
    }
}

}  // namespace deskside::test
