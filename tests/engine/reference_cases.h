// llama.cpp's reference runs (../shared/reference/<model>.json + .logits.f32, described in that
// folder's README.md), loaded for the engine tests.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/paths.h"

namespace deskside::test {

struct ReferenceCase {
    std::vector<int32_t> prompt_tokens;
    std::vector<int32_t> greedy_tokens;
    std::vector<float> logits;  // logits_rows x n_vocab
    int64_t rows = 0;
};

struct ReferenceRun {
    int64_t n_vocab = 0;
    std::vector<ReferenceCase> cases;
};

inline ReferenceRun load_reference(const std::string& model_stem) {
    const std::string dir = shared_path("reference/");
    std::ifstream jf(dir + model_stem + ".json");
    if (!jf) throw std::runtime_error("missing reference " + dir + model_stem + ".json");
    const nlohmann::json j = nlohmann::json::parse(jf);
    ReferenceRun run;
    run.n_vocab = j.at("n_vocab").get<int64_t>();
    std::ifstream lf(dir + j.at("logits_file").get<std::string>(), std::ios::binary);
    for (const auto& c : j.at("cases")) {
        ReferenceCase rc;
        rc.prompt_tokens = c.at("prompt_tokens").get<std::vector<int32_t>>();
        rc.greedy_tokens = c.at("greedy_tokens").get<std::vector<int32_t>>();
        rc.rows = c.at("logits_rows").get<int64_t>();
        rc.logits.resize(rc.rows * run.n_vocab);
        lf.seekg(c.at("logits_offset_bytes").get<int64_t>());
        lf.read(reinterpret_cast<char*>(rc.logits.data()), static_cast<std::streamsize>(rc.logits.size() * sizeof(float)));
        if (!lf) throw std::runtime_error("short logits file for " + model_stem);
        run.cases.push_back(std::move(rc));
    }
    return run;
}

}  // namespace deskside::test
