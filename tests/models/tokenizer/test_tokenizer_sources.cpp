// Tokenizers built from other sources than a vocab GGUF (Hugging Face files, a SentencePiece
// model, a real model's GGUF) against references we did not produce: llama.cpp's vectors,
// llama.cpp's prompt tokens for stories260K, and the ids Hugging Face files give special tokens.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/tokenizer/tokenizer.h"
#include "vocab_cases.h"

namespace deskside::test {
namespace {

size_t count_mismatches(const models::Tokenizer& tok, const std::string& vocab_name) {
    size_t failures = 0;
    for (const VocabCase& c : read_vocab_cases(vocab_name)) {
        if (tok.encode(c.text, false, false) != c.ids) {
            ++failures;
            UNSCOPED_INFO("case '" << c.text << "' differs");
        }
    }
    return failures;
}

// The id Hugging Face's tokenizer.json gives an added token.
int32_t hf_added_token_id(const std::string& dir, const std::string& content) {
    const auto j = nlohmann::json::parse(read_all(shared_path("models/hf-tokenizers/" + dir + "/tokenizer.json")));
    for (const auto& a : j["added_tokens"]) {
        if (a["content"] == content) return a["id"].get<int32_t>();
    }
    throw std::runtime_error(content + " not in " + dir);
}

std::string run_capture(const std::string& cmd) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    CHECK(pclose(p) == 0);
    return out;
}

}  // namespace

TEST_CASE("tokenizer: HF llama3 tokenizer.json reproduces the llama-bpe vectors", "[tokenizer]") {
    const auto tok = models::Tokenizer::from_hf_dir(shared_path("models/hf-tokenizers/llama3"));
    CHECK(count_mismatches(*tok, "ggml-vocab-llama-bpe") == 0);
}

TEST_CASE("tokenizer: HF qwen3 tokenizer.json reproduces the qwen2 vectors", "[tokenizer]") {
    const auto tok = models::Tokenizer::load(shared_path("models/hf-tokenizers/qwen3"));
    CHECK(count_mismatches(*tok, "ggml-vocab-qwen2") == 0);
    // tokenizer_config.json: no BOS, <|im_end|> ends a turn.
    CHECK_FALSE(tok->add_bos());
    CHECK(tok->eos() == hf_added_token_id("qwen3", "<|im_end|>"));
    CHECK(tok->is_eog(hf_added_token_id("qwen3", "<|im_end|>")));
}

TEST_CASE("tokenizer: llama2 tokenizer.model through libsentencepiece reproduces the llama-spm vectors",
          "[tokenizer]") {
    const auto tok = models::Tokenizer::load(shared_path("models/llama2-tokenizer.model"));
    CHECK(tok->kind() == "sentencepiece");
    CHECK(count_mismatches(*tok, "ggml-vocab-llama-spm") == 0);
}

TEST_CASE("tokenizer: control tokens are parsed only when asked", "[tokenizer]") {
    const auto tok = models::Tokenizer::load(shared_path("models/vocab/ggml-vocab-llama-bpe.gguf"));
    const int32_t eot = hf_added_token_id("llama3", "<|eot_id|>");
    const int32_t start = hf_added_token_id("llama3", "<|start_header_id|>");
    const auto parsed = tok->encode("<|start_header_id|>user<|eot_id|>", false, true);
    REQUIRE(parsed.size() == 3);
    CHECK(parsed.front() == start);
    CHECK(parsed.back() == eot);
    CHECK(parsed[1] == tok->encode("user", false, false).at(0));
    const auto plain = tok->encode("<|start_header_id|>user<|eot_id|>", false, false);
    CHECK(plain.size() > 3);
    CHECK(std::find(plain.begin(), plain.end(), eot) == plain.end());
    CHECK(tok->decode(plain) == "<|start_header_id|>user<|eot_id|>");
    // Rendering: control tokens print nothing unless asked.
    CHECK(tok->decode(parsed) == "user");
    models::DecodeOptions render;
    render.render_special = true;
    CHECK(tok->decode(parsed, render) == "<|start_header_id|>user<|eot_id|>");
    CHECK(tok->is_eog(eot));
    CHECK(tok->eot() == eot);
}

TEST_CASE("tokenizer: SPM text after a special token gets its own space prefix", "[tokenizer]") {
    // llama.cpp prefixes every text run that follows a special token with a space; for
    // "<s>Hello" that gives the same ids as BOS followed by " Hello".
    const auto tok = models::Tokenizer::load(shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
    const auto with_bos = tok->encode("Hello", true, false);
    CHECK(tok->encode("<s>Hello", false, true) == with_bos);
    CHECK(with_bos.front() == *tok->bos());
    // The leading space llama.cpp strips is the prefix of the first piece when no BOS precedes it.
    CHECK(tok->decode(tok->encode("Hello", false, false)) == "Hello");
    CHECK(tok->decode(with_bos) == " Hello");
    models::DecodeOptions skip;
    skip.remove_special = true;
    CHECK(tok->decode(with_bos, skip) == " Hello");
}

TEST_CASE("tokenizer: stories260K prompts tokenize as llama.cpp did", "[tokenizer]") {
    const auto ref = nlohmann::json::parse(read_all(shared_path("reference/stories260K.json")));
    const auto tok = models::Tokenizer::from_gguf(models::GgufFile::open(shared_path("models/stories260K.gguf")));
    CHECK(tok->n_vocab() == ref["n_vocab"].get<int32_t>());
    REQUIRE(ref["cases"].size() >= 5);
    for (const auto& c : ref["cases"]) {
        INFO(c["prompt"].get<std::string>());
        CHECK(tok->encode(c["prompt"].get<std::string>(), true, false) == c["prompt_tokens"].get<std::vector<int32_t>>());
        // Streaming the generated tokens reproduces llama.cpp's text piece by piece.
        if (c.contains("greedy_text")) {
            models::StreamDecoder stream(*tok);
            std::string text;
            for (int32_t id : c["greedy_tokens"].get<std::vector<int32_t>>()) text += stream.push(id);
            text += stream.flush();
            CHECK(text == c["greedy_text"].get<std::string>());
        }
    }
}

TEST_CASE("tokenizer: the stream decoder holds back incomplete UTF-8", "[tokenizer]") {
    // 🦙 is not in the Llama 2 vocabulary: it becomes four byte tokens.
    const auto tok = models::Tokenizer::load(shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
    const auto ids = tok->encode("a🦙b", false, false);
    models::StreamDecoder stream(*tok);
    std::vector<std::string> outs;
    for (int32_t id : ids) outs.push_back(stream.push(id));
    std::string all;
    for (const auto& o : outs) all += o;
    CHECK(all + stream.flush() == " a🦙b");
    // Every chunk is valid UTF-8 on its own: the emoji comes out whole in one chunk.
    CHECK(std::find(outs.begin(), outs.end(), "\xF0\x9F\xA6\x99") != outs.end());
    size_t empty = 0;
    for (const auto& o : outs) empty += o.empty();
    CHECK(empty == 3);  // the first three of the four byte tokens
    // A stream that stops inside a sequence flushes a replacement character.
    models::StreamDecoder cut(*tok);
    REQUIRE(tok->piece(ids.at(1)) == "\xF0");
    CHECK(cut.push(ids.at(1)).empty());
    CHECK(cut.has_pending());
    CHECK(cut.flush() == "\xEF\xBF\xBD");
}

TEST_CASE("tokenizer: bad inputs give errors naming the problem", "[tokenizer]") {
    CHECK_THROWS_WITH(models::Tokenizer::load("/nonexistent/model.gguf"), Catch::Contains("/nonexistent/model.gguf"));
    const auto dir = std::filesystem::temp_directory_path() / "deskside-tok-test";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "WordPiece", "vocab": {}}})";
    CHECK_THROWS_WITH(models::Tokenizer::from_hf_dir(dir.string()), Catch::Contains("model.type") && Catch::Contains("WordPiece"));
    std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[a-"}, "behavior": "Isolated"}})";
    CHECK_THROWS_WITH(models::Tokenizer::from_hf_dir(dir.string()), Catch::Contains("pre_tokenizer"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("tokenizer: deskside tokenize prints llama.cpp's ids", "[tokenizer]") {
    const auto cases = read_vocab_cases("ggml-vocab-qwen2");
    const std::string model = shared_path("models/vocab/ggml-vocab-qwen2.gguf");
    const auto tmp = std::filesystem::temp_directory_path() / "deskside-tokenize-input.txt";
    for (size_t i : {9u, 14u, 27u, 44u}) {
        REQUIRE(i < cases.size());
        INFO("case " << i << ": '" << cases[i].text << "'");
        std::ofstream(tmp, std::ios::binary) << cases[i].text;
        const std::string out = run_capture(deskside_binary() + " tokenize --no-bos -m " + model + " -f " + tmp.string());
        CHECK(nlohmann::json::parse(out).get<std::vector<int32_t>>() == cases[i].ids);
    }
    std::filesystem::remove(tmp);
    const std::string out = run_capture(deskside_binary() + " tokenize -m " + shared_path("models/stories260K.gguf") +
                                        " -p 'Once upon a time' --pieces");
    const auto pieces = nlohmann::json::parse(out);
    REQUIRE(pieces.size() == 5);
    CHECK(pieces[0][0] == 1);
    CHECK(pieces[1][1] == " Once");
}

}  // namespace deskside::test

namespace deskside::test {

// RFC 3629 well-formedness, written out here so the check does not reuse the code under test.
bool is_valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        uint32_t cp = n == 1 ? c : c & (0x7F >> n);
        for (size_t k = 1; k < n; ++k) {
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3F);
        }
        const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += n;
    }
    return true;
}

TEST_CASE("tokenizer: arbitrary bytes encode to valid ids and decode to valid UTF-8", "[tokenizer]") {
    std::string bytes;
    uint32_t state = 12345;
    for (int i = 0; i < 4000; ++i) {
        state = state * 1103515245u + 12345u;  // a fixed pseudo-random byte sequence
        bytes += static_cast<char>(state >> 23);
    }
    for (const char* name : {"ggml-vocab-llama-spm", "ggml-vocab-llama-bpe", "ggml-vocab-gemma-4", "ggml-vocab-deepseek-llm"}) {
        INFO(name);
        const auto tok = models::Tokenizer::load(shared_path(std::string("models/vocab/") + name + ".gguf"));
        const auto ids = tok->encode(bytes, true, true);
        CHECK(ids.size() > 100);
        CHECK(std::all_of(ids.begin(), ids.end(), [&](int32_t id) { return id >= 0 && id < tok->n_vocab(); }));
        models::StreamDecoder stream(*tok);
        std::string text;
        for (int32_t id : ids) text += stream.push(id);
        text += stream.flush();
        CHECK(is_valid_utf8(text));
        CHECK_FALSE(text.empty());
    }
}

}  // namespace deskside::test
