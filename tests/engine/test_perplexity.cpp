// Perplexity against llama-perplexity's published numbers on the same text and files
// (../shared/reference/README.md: -c 128 on ppl-text-gpl3.txt).
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "backends/cpu/cpu_backend.h"
#include "engine/perplexity.h"
#include "models/model.h"
#include "models/tokenizer/tokenizer.h"
#include "support/paths.h"

namespace deskside::engine {

TEST_CASE("perplexity of stories260K agrees with llama-perplexity within 0.5%", "[engine]") {
    std::ifstream in(test::shared_path("reference/ppl-text-gpl3.txt"), std::ios::binary);
    REQUIRE(in);
    std::stringstream ss;
    ss << in.rdbuf();
    const struct {
        const char* stem;
        double ppl;  // llama-perplexity, from the README
    } kCases[] = {{"stories260K", 105.3245}, {"stories260K-q8_0", 105.3610}, {"stories260K-q4_0", 113.1851}};
    for (const auto& c : kCases) {
        const std::string path = test::shared_path(std::string("models/") + c.stem + ".gguf");
        const auto tokenizer = models::Tokenizer::load(path);
        const std::vector<int32_t> tokens = tokenizer->encode(ss.str(), true, false);
        backends::cpu::CpuBackend backend(2);
        EngineOptions opt;
        opt.cache.n_positions = 128;
        opt.n_batch = 128;
        Model model(models::load_model(path), backend, opt);
        const PerplexityResult r = perplexity(model, tokens, 128, tokenizer->bos());
        INFO(c.stem << ": ours " << r.ppl << " over " << r.n_chunks << " chunks, llama.cpp " << c.ppl);
        CHECK(r.n_chunks == 173);
        CHECK(r.n_scored == 173 * 63);
        CHECK(std::fabs(r.ppl / c.ppl - 1) <= 0.005);
    }
}

}  // namespace deskside::engine
