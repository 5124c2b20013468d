// The generation loop and `deskside generate` against llama.cpp's greedy runs: its tokenizer
// gave the reference prompt_tokens and its greedy decoding the greedy_tokens.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_backend.h"
#include "engine/generation.h"
#include "models/model.h"
#include "models/tokenizer/tokenizer.h"
#include "reference_cases.h"
#include "support/process.h"

namespace deskside::engine {

TEST_CASE("deskside generate --temp 0 reproduces llama.cpp's greedy tokens", "[engine]") {
    const std::string model = test::shared_path("models/stories260K.gguf");
    std::ifstream jf(test::shared_path("reference/stories260K.json"));
    const nlohmann::json ref = nlohmann::json::parse(jf);
    for (const auto& c : ref.at("cases")) {
        const test::ProcessResult r = test::run_deskside(
            {"generate", "-m", model, "-p", c.at("prompt").get<std::string>(), "-n", "64", "--temp", "0", "--json"});
        REQUIRE(r.exit_code == 0);
        const nlohmann::json out = nlohmann::json::parse(r.out);
        INFO(c.at("prompt").get<std::string>());
        CHECK(out.at("prompt_tokens") == c.at("prompt_tokens"));
        CHECK(out.at("tokens") == c.at("greedy_tokens"));
        CHECK(out.at("text") == c.at("greedy_text"));
        CHECK(r.err.find("tokens/s") != std::string::npos);
    }
}

TEST_CASE("deskside generate prints only the completion and rejects bad flags", "[engine]") {
    const std::string model = test::shared_path("models/stories260K.gguf");
    const test::ProcessResult r = test::run_deskside({"generate", "-m", model, "-p", "Once upon a time", "-n", "12", "--temp", "0"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == ", there was a little girl named Lily. She");  // llama.cpp's greedy_text, first 12 tokens
    const test::ProcessResult bad = test::run_deskside({"generate", "-m", model, "-p", "x", "--cache-type-k", "q3"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("unsupported KV cache type 'q3'") != std::string::npos);
}

TEST_CASE("generation stops before a stop string and at end-of-generation tokens", "[engine]") {
    const std::string path = test::shared_path("models/stories260K.gguf");
    const auto tokenizer = models::Tokenizer::load(path);
    backends::cpu::CpuBackend backend(1);
    Model model(models::load_model(path), backend);
    const std::vector<int32_t> prompt = tokenizer->encode("Once upon a time", true, false);
    GenerateParams gp;
    gp.sampling.temperature = 0;
    gp.max_tokens = 64;
    gp.stop = {" named"};
    std::string streamed;
    const GenerateResult r = generate(model, *tokenizer, prompt, gp, [&](std::string_view t) { streamed += t; });
    CHECK(r.text == ", there was a little girl");
    CHECK(streamed == r.text);
    CHECK(r.finish_reason == "stop");

    // Banning nothing and biasing EOS to the top ends generation at once, without the token.
    gp.stop.clear();
    gp.sampling.logit_bias = {{*tokenizer->eos(), 100.0f}};
    const GenerateResult e = generate(model, *tokenizer, prompt, gp);
    CHECK(e.tokens.empty());
    CHECK(e.finish_reason == "stop");
}

}  // namespace deskside::engine
