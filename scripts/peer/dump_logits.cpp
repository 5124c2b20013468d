// Peer tool (not part of deskside): runs llama.cpp, linked from the peer build that
// scripts/peer/build-dump-logits.sh names, on the tokens of a reference run in
// ../shared/reference/<model>.json and writes its logits in the reference's own layout, so the
// reference (llama.cpp on the machine that made it), llama.cpp on this machine and deskside can
// be compared three ways (scripts/peer/compare_logits.py).
//
//   dump_logits MODEL.gguf REF.json OUT.f32 [--mode ref|batch] [--threads N] [--no-repack]
//               [--dump-dir DIR --dump-case I [--dump-pos P]]
//
// --mode ref   (default) what made the reference: the prompt in one batch (every row kept), then
//              the reference's greedy tokens one per decode (teacher-forced, so rows line up).
// --mode batch prompt + greedy tokens in one batch, as deskside's teacher-forced test does.
// --dump-dir   writes every F32 tensor llama.cpp computes for case I's first decode (or, with
//              --dump-pos, the decode of position P in ref mode) as DIR/<name>.f32 (ne0 ne1 ne2
//              ne3 as int64, then the floats; NNN counts in evaluation order), via its eval callback.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"

namespace {

struct DumpState {
    std::string dir;
    bool active = false;
    int counter = 0;  // prefixes file names: llama.cpp gives a tensor and its rope'd self one name
};

bool dump_tensor(ggml_tensor* t, bool ask, void* user) {
    auto* st = static_cast<DumpState*>(user);
    if (ask) return st->active;
    if (!st->active || t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) return true;
    std::vector<float> data(ggml_nelements(t));
    ggml_backend_tensor_get(t, data.data(), 0, data.size() * sizeof(float));
    std::string name = t->name;
    for (char& c : name) if (c == '/' || c == ' ' || c == '(' || c == ')') c = '_';
    char seq[16];
    std::snprintf(seq, sizeof(seq), "%03d_", st->counter++);
    std::ofstream f(st->dir + "/" + seq + name + ".f32", std::ios::binary);
    const int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    f.write(reinterpret_cast<const char*>(ne), sizeof(ne));
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(float)));
    return true;
}

void decode(llama_context* ctx, const std::vector<llama_token>& toks, int32_t pos0, std::vector<float>& out, int32_t n_vocab) {
    llama_batch b = llama_batch_init(static_cast<int32_t>(toks.size()), 0, 1);
    for (size_t i = 0; i < toks.size(); ++i) {
        b.token[i] = toks[i];
        b.pos[i] = pos0 + static_cast<int32_t>(i);
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = static_cast<int32_t>(toks.size());
    if (llama_decode(ctx, b) != 0) throw std::runtime_error("llama_decode failed");
    for (size_t i = 0; i < toks.size(); ++i) {
        const float* l = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
        out.insert(out.end(), l, l + n_vocab);
    }
    llama_batch_free(b);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: dump_logits MODEL.gguf REF.json OUT.f32 [--mode ref|batch] [--threads N] "
                             "[--no-repack] [--dump-dir DIR --dump-case I]\n");
        return 2;
    }
    std::string mode = "ref", dump_dir;
    int threads = 2, dump_case = -1, dump_pos = -1;
    bool repack = true;
    for (int i = 4; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mode" && i + 1 < argc) mode = argv[++i];
        else if (a == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
        else if (a == "--no-repack") repack = false;
        else if (a == "--dump-dir" && i + 1 < argc) dump_dir = argv[++i];
        else if (a == "--dump-case" && i + 1 < argc) dump_case = std::stoi(argv[++i]);
        else if (a == "--dump-pos" && i + 1 < argc) dump_pos = std::stoi(argv[++i]);
        else {
            std::fprintf(stderr, "dump_logits: unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    try {
        std::ifstream jf(argv[2]);
        if (!jf) throw std::runtime_error(std::string("cannot open ") + argv[2]);
        const nlohmann::json ref = nlohmann::json::parse(jf);

        llama_backend_init();
        llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
        llama_model_params mp = llama_model_default_params();
        mp.use_extra_bufts = repack;
        llama_model* model = llama_model_load_from_file(argv[1], mp);
        if (!model) throw std::runtime_error(std::string("cannot load ") + argv[1]);
        const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

        DumpState st{dump_dir, false};
        std::ofstream out(argv[3], std::ios::binary);
        int case_index = 0;
        for (const auto& c : ref.at("cases")) {
            const auto prompt = c.at("prompt_tokens").get<std::vector<llama_token>>();
            const auto greedy = c.at("greedy_tokens").get<std::vector<llama_token>>();
            llama_context_params cp = llama_context_default_params();
            cp.n_ctx = 512;
            cp.n_batch = 512;
            cp.n_ubatch = 512;
            cp.n_threads = threads;
            cp.n_threads_batch = threads;
            cp.cb_eval = dump_dir.empty() ? nullptr : dump_tensor;
            cp.cb_eval_user_data = &st;
            llama_context* ctx = llama_init_from_model(model, cp);
            if (!ctx) throw std::runtime_error("cannot create a context");
            std::vector<float> logits;
            const bool dump_this = !dump_dir.empty() && case_index == dump_case;
            st.active = dump_this && dump_pos < 0;
            if (mode == "batch") {
                std::vector<llama_token> all = prompt;
                all.insert(all.end(), greedy.begin(), greedy.end() - 1);
                decode(ctx, all, 0, logits, n_vocab);
            } else {
                decode(ctx, prompt, 0, logits, n_vocab);
                for (size_t k = 0; k + 1 < greedy.size(); ++k) {
                    const auto pos = static_cast<int32_t>(prompt.size() + k);
                    st.active = dump_this && pos == dump_pos;
                    decode(ctx, {greedy[k]}, pos, logits, n_vocab);
                }
            }
            st.active = false;
            out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
            llama_free(ctx);
            ++case_index;
        }
        llama_model_free(model);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dump_logits: %s\n", e.what());
        return 1;
    }
    return 0;
}
