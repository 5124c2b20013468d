// Peer tool: deskside's side of scripts/peer/dump_logits.cpp. Runs deskside's engine on the
// tokens of a reference run and writes its logits in the reference's layout, so
// scripts/peer/compare_logits.py can set it against the reference and against llama.cpp on
// this machine.
//
//   dump_deskside MODEL.gguf REF.json OUT.f32 [--mode ref|batch] [--threads N]
//                 [--dump-dir DIR --dump-case I --dump-pos P]
//
// --mode batch (default) prompt + greedy tokens in one batch, as tests/engine's teacher-forced
//              test does; --mode ref: the prompt in one batch, then one token per decode.
// --dump-dir   (ref mode) writes the output of every op of the decode of case I's position P (the
//              prompt's decode if P is inside the prompt) as DIR/NNN_<op>.f32 (ne0 ne1 as int64,
//              then the floats), in call order, through a Backend that records what it forwards;
//              scripts/peer/match_tensors.py pairs them with dump_logits' tensors.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/model.h"
#include "models/model.h"

using namespace deskside;

namespace {

// Forwards every call to the CPU backend and, while `active`, saves each op's output.
class RecordingBackend : public backends::Backend {
   public:
    RecordingBackend(backends::Backend& inner, std::string dir) : inner_(inner), dir_(std::move(dir)) {}
    bool active = false;

    std::string name() const override { return inner_.name(); }
    std::unique_ptr<backends::Buffer> alloc(size_t bytes) override { return inner_.alloc(bytes); }
    std::unique_ptr<backends::Buffer> map_weights(const void* host, size_t bytes) override {
        return inner_.map_weights(host, bytes);
    }
    void upload(backends::Buffer& dst, size_t offset, const void* src, size_t bytes) override {
        inner_.upload(dst, offset, src, bytes);
    }
    void download(const backends::Buffer& src, size_t offset, void* dst, size_t bytes) override {
        inner_.download(src, offset, dst, bytes);
    }
    void synchronize() override { inner_.synchronize(); }
    void get_rows(const backends::Tensor& t, std::span<const int32_t> ids, const backends::Tensor& d) override {
        inner_.get_rows(t, ids, d);
        record("get_rows", d);
    }
    void matmul(const backends::Tensor& w, const backends::Tensor& x, const backends::Tensor& y) override {
        inner_.matmul(w, x, y);
        record("matmul", y);
    }
    void rms_norm(const backends::Tensor& x, const backends::Tensor& w, float eps, const backends::Tensor& y) override {
        inner_.rms_norm(x, w, eps, y);
        record("rms_norm", y);
    }
    void rope(const backends::Tensor& x, std::span<const int32_t> pos, const backends::RopeParams& p) override {
        inner_.rope(x, pos, p);
        record("rope", x);
    }
    void attention(const backends::Tensor& q, const backends::KvCacheView& kv, std::span<const backends::AttentionQuery> qs,
                   const backends::AttentionParams& p, const backends::Tensor& out) override {
        inner_.attention(q, kv, qs, p, out);
        record("attention", out);
    }
    void softmax(const backends::Tensor& x) override {
        inner_.softmax(x);
        record("softmax", x);
    }
    void silu(const backends::Tensor& x, const backends::Tensor& y) override {
        inner_.silu(x, y);
        record("silu", y);
    }
    void gelu(const backends::Tensor& x, const backends::Tensor& y) override {
        inner_.gelu(x, y);
        record("gelu", y);
    }
    void add(const backends::Tensor& a, const backends::Tensor& b, const backends::Tensor& y) override {
        inner_.add(a, b, y);
        record("add", y);
    }
    void mul(const backends::Tensor& a, const backends::Tensor& b, const backends::Tensor& y) override {
        inner_.mul(a, b, y);
        record("mul", y);
    }
    void scale(const backends::Tensor& x, float s, const backends::Tensor& y) override {
        inner_.scale(x, s, y);
        record("scale", y);
    }
    void copy(const backends::Tensor& src, const backends::Tensor& dst) override { inner_.copy(src, dst); }
    void set_rows(const backends::Tensor& src, const backends::Tensor& dst, std::span<const int32_t> rows) override {
        inner_.set_rows(src, dst, rows);
    }
    void moe_route(const backends::Tensor& logits, const backends::MoeRouteParams& p, const backends::Tensor& ids,
                   const backends::Tensor& weights) override {
        inner_.moe_route(logits, p, ids, weights);
        record("moe_route", weights);
    }
    void matmul_id(const backends::Tensor& w, int64_t n_expert, const backends::Tensor& x, const backends::Tensor& ids,
                   const backends::Tensor& y) override {
        inner_.matmul_id(w, n_expert, x, ids, y);
        record("matmul_id", y);
    }
    void add_id(const backends::Tensor& a, const backends::Tensor& b, const backends::Tensor& ids,
                const backends::Tensor& y) override {
        inner_.add_id(a, b, ids, y);
        record("add_id", y);
    }
    void moe_combine(const backends::Tensor& y, const backends::Tensor& weights, const backends::Tensor& out) override {
        inner_.moe_combine(y, weights, out);
        record("moe_combine", out);
    }
    void swiglu_oai(const backends::Tensor& gate, const backends::Tensor& up, float alpha, float limit,
                    const backends::Tensor& y) override {
        inner_.swiglu_oai(gate, up, alpha, limit, y);
        record("swiglu_oai", y);
    }

   private:
    void record(const char* op, const backends::Tensor& t) {
        if (!active || t.type != quant::TypeId::F32) return;
        std::vector<float> data(t.ne0 * t.ne1);
        for (int64_t r = 0; r < t.ne1; ++r)
            inner_.download(*t.buffer, t.offset + r * t.row_stride, data.data() + r * t.ne0, t.ne0 * sizeof(float));
        char name[64];
        std::snprintf(name, sizeof(name), "/%03d_%s.f32", counter_++, op);
        std::ofstream f(dir_ + name, std::ios::binary);
        const int64_t ne[2] = {t.ne0, t.ne1};
        f.write(reinterpret_cast<const char*>(ne), sizeof(ne));
        f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(float)));
    }

    backends::Backend& inner_;
    std::string dir_;
    int counter_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: dump_deskside MODEL.gguf REF.json OUT.f32 [--mode ref|batch] [--threads N]\n");
        return 2;
    }
    std::string mode = "batch", dump_dir;
    int threads = 2, dump_case = -1, dump_pos = -1;
    for (int i = 4; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mode" && i + 1 < argc) mode = argv[++i];
        else if (a == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
        else if (a == "--dump-dir" && i + 1 < argc) dump_dir = argv[++i];
        else if (a == "--dump-case" && i + 1 < argc) dump_case = std::stoi(argv[++i]);
        else if (a == "--dump-pos" && i + 1 < argc) dump_pos = std::stoi(argv[++i]);
        else {
            std::fprintf(stderr, "dump_deskside: unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    try {
        std::ifstream jf(argv[2]);
        if (!jf) throw std::runtime_error(std::string("cannot open ") + argv[2]);
        const nlohmann::json ref = nlohmann::json::parse(jf);
        backends::cpu::CpuBackend cpu(threads);
        RecordingBackend backend(cpu, dump_dir);
        engine::Model model(models::load_model(argv[1]), backend);
        std::ofstream out(argv[3], std::ios::binary);
        int32_t seq = 0;
        for (const auto& c : ref.at("cases")) {
            std::vector<int32_t> tokens = c.at("prompt_tokens").get<std::vector<int32_t>>();
            const auto greedy = c.at("greedy_tokens").get<std::vector<int32_t>>();
            const size_t n_prompt = tokens.size();
            tokens.insert(tokens.end(), greedy.begin(), greedy.end() - 1);
            const size_t first_step = mode == "batch" ? tokens.size() : n_prompt;
            std::vector<engine::BatchToken> batch;
            for (size_t i = 0; i < tokens.size(); ++i) {
                batch.push_back({seq, tokens[i], static_cast<int32_t>(i), true});
                if (i + 1 >= first_step) {
                    backend.active = !dump_dir.empty() && seq == dump_case && static_cast<int64_t>(i) >= dump_pos &&
                                     static_cast<int64_t>(i + 1 - batch.size()) <= dump_pos;
                    const std::span<const float> logits = model.decode(batch);
                    out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size_bytes()));
                    batch.clear();
                }
            }
            model.truncate(seq, 0);
            ++seq;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dump_deskside: %s\n", e.what());
        return 1;
    }
    return 0;
}
