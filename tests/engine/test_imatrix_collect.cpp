// collect_imatrix on a mixture-of-experts model, where llama-imatrix's per-expert bookkeeping
// applies (tests/py/test_imatrix.py compares a dense model with llama-imatrix's own file). What
// must hold whatever the activations: every token reaches n_used experts of every expert tensor;
// gate and up read the same rows, so their sums are the same floats; the router and the experts
// read the same normed input, so the experts' sums add up to n_used times the router's.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "backends/cpu/cpu_backend.h"
#include "engine/imatrix.h"
#include "models/model.h"
#include "models/tokenizer/tokenizer.h"
#include "support/paths.h"
#include "support/required.h"

namespace deskside::engine {

TEST_CASE("collect_imatrix counts routed rows per expert", "[imatrix][engine]") {
    const std::string path = test::shared_path("models/synth-qwen3moe-q8_0.gguf");
    if (!test::model_or_skip(path, "the expert imatrix test", "../shared/models")) return;
    std::ifstream in(test::shared_path("reference/ppl-text-gpl3.txt"), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const auto tokenizer = models::Tokenizer::load(path);
    const std::vector<int32_t> tokens = tokenizer->encode(text.str(), true, false);
    constexpr int64_t kCtx = 64, kChunks = 3;
    backends::cpu::CpuBackend backend(2);
    EngineOptions opt;
    opt.cache.n_positions = kCtx;
    opt.n_batch = kCtx;
    Model model(models::load_model(path), backend, opt);
    ImatrixRun run;
    run.n_ctx = kCtx;
    run.max_chunks = kChunks;
    run.bos = tokenizer->bos();
    const models::Imatrix im = collect_imatrix(model, tokens, run);
    CHECK(im.chunk_count == kChunks);
    CHECK(im.chunk_size == kCtx);
    CHECK(im.entries.size() == 2 * 8);  // per layer: q, k, v, output, router, 3 expert tensors
    const int64_t n_tokens = kCtx * kChunks, n_used = model.hparams().n_expert_used;
    for (int il = 0; il < 2; ++il) {
        const std::string blk = "blk." + std::to_string(il) + ".";
        const models::ImatrixEntry* router = im.find(blk + "ffn_gate_inp.weight");
        const models::ImatrixEntry* gate = im.find(blk + "ffn_gate_exps.weight");
        const models::ImatrixEntry* up = im.find(blk + "ffn_up_exps.weight");
        const models::ImatrixEntry* down = im.find(blk + "ffn_down_exps.weight");
        REQUIRE(router);
        REQUIRE(gate);
        REQUIRE(up);
        REQUIRE(down);
        CHECK(router->counts == std::vector<float>{static_cast<float>(n_tokens)});
        CHECK(im.find(blk + "attn_q.weight")->counts == router->counts);
        for (const models::ImatrixEntry* e : {gate, up, down}) {
            INFO(e->name);
            CHECK(e->n_mat == 8);
            double routed = 0;
            for (const float c : e->counts) routed += c;
            CHECK(routed == static_cast<double>(n_tokens * n_used));
        }
        CHECK(gate->in_sum2 == up->in_sum2);
        CHECK(gate->counts == down->counts);
        CHECK(down->n_per_row == model.hparams().n_ff_exp);
        for (int64_t j = 0; j < gate->n_per_row; ++j) {
            double experts = 0;
            for (int64_t ex = 0; ex < 8; ++ex) experts += gate->in_sum2[static_cast<size_t>(ex * gate->n_per_row + j)];
            const double expect = static_cast<double>(n_used) * router->in_sum2[static_cast<size_t>(j)];
            CHECK(std::fabs(experts - expect) <= 1e-4 * expect);  // float sums in another order
        }
    }
}

}  // namespace deskside::engine
