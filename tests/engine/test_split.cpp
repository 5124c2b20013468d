// One model split by layers across devices (DESIGN.md key decision 3). Two CpuBackend instances
// are two devices with separate allocations: the residual stream crosses between them through
// download + upload exactly as between GPUs, so "cpu,cpu" tests the split itself. The CPU
// computes each row the same way on any instance, so split logits must equal one-device logits
// bit for bit, and greedy runs must equal llama.cpp's reference tokens (up to the first one whose
// reference top-2 gap is below reference_check.h's kGreedyGap).
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/model.h"
#include "engine/placement.h"
#include "models/model.h"
#include "reference_check.h"

namespace deskside::engine {
namespace {

using test::greedy;
using test::shared_path;
using test::split_layers;

// Counts the bytes a model takes on a device, and otherwise forwards to it.
class CountingBackend : public backends::Backend {
   public:
    explicit CountingBackend(backends::Backend& inner) : inner_(inner) {}
    uint64_t bytes = 0;
    // A type this device claims it cannot compute with (supports() says no), to test placement.
    std::optional<quant::TypeId> refuse;

    std::string name() const override { return inner_.name(); }
    std::unique_ptr<backends::Buffer> alloc(size_t n) override {
        bytes += n;
        return inner_.alloc(n);
    }
    std::unique_ptr<backends::Buffer> map_weights(const void* host, size_t n) override {
        bytes += n;
        return inner_.map_weights(host, n);
    }
    void upload(backends::Buffer& dst, size_t off, const void* src, size_t n) override { inner_.upload(dst, off, src, n); }
    void download(const backends::Buffer& src, size_t off, void* dst, size_t n) override { inner_.download(src, off, dst, n); }
    bool supports(backends::Op op, quant::TypeId type) const override {
        return type != refuse && inner_.supports(op, type);
    }
    // Buffers are the inner backend's (their owner), so copies go through it.
    void copy_to(const backends::Buffer& src, size_t so, backends::Backend& to, backends::Buffer& dst, size_t doff,
                 size_t n) override {
        auto* counting = dynamic_cast<CountingBackend*>(&to);
        inner_.copy_to(src, so, counting ? counting->inner_ : to, dst, doff, n);
    }
    void get_rows(const backends::Tensor& t, const backends::Tensor& ids, const backends::Tensor& d) override {
        inner_.get_rows(t, ids, d);
    }
    void matmul(const backends::Tensor& w, const backends::Tensor& x, const backends::Tensor& y) override { inner_.matmul(w, x, y); }
    void rms_norm(const backends::Tensor& x, const backends::Tensor& w, float eps, const backends::Tensor& y) override {
        inner_.rms_norm(x, w, eps, y);
    }
    void rope(const backends::Tensor& x, const backends::Tensor& pos, const backends::RopeParams& p) override {
        inner_.rope(x, pos, p);
    }
    void attention(const backends::Tensor& q, const backends::KvCacheView& kv, const backends::Tensor& qs,
                   const backends::AttentionParams& p, const backends::Tensor& out) override {
        inner_.attention(q, kv, qs, p, out);
    }
    void silu(const backends::Tensor& x, const backends::Tensor& y) override { inner_.silu(x, y); }
    void gelu(const backends::Tensor& x, const backends::Tensor& y) override { inner_.gelu(x, y); }
    void add(const backends::Tensor& a, const backends::Tensor& b, const backends::Tensor& y) override { inner_.add(a, b, y); }
    void mul(const backends::Tensor& a, const backends::Tensor& b, const backends::Tensor& y) override { inner_.mul(a, b, y); }
    void scale(const backends::Tensor& x, float s, const backends::Tensor& y) override { inner_.scale(x, s, y); }
    void copy(const backends::Tensor& s, const backends::Tensor& d) override { inner_.copy(s, d); }
    void set_rows(const backends::Tensor& s, const backends::Tensor& d, const backends::Tensor& rows) override {
        inner_.set_rows(s, d, rows);
    }
    void moe_route(const backends::Tensor& l, const backends::MoeRouteParams& p, const backends::Tensor& ids,
                   const backends::Tensor& w) override {
        inner_.moe_route(l, p, ids, w);
    }
    void matmul_id(const backends::Tensor& w, int64_t n_expert, const backends::Tensor& x, const backends::Tensor& ids,
                   const backends::Tensor& y) override {
        inner_.matmul_id(w, n_expert, x, ids, y);
    }
    void add_id(const backends::Tensor& a, const backends::Tensor& b, const backends::Tensor& ids,
                const backends::Tensor& y) override {
        inner_.add_id(a, b, ids, y);
    }
    void moe_combine(const backends::Tensor& y, const backends::Tensor& w, const backends::Tensor& out) override {
        inner_.moe_combine(y, w, out);
    }
    void swiglu_oai(const backends::Tensor& g, const backends::Tensor& u, float alpha, float limit,
                    const backends::Tensor& y) override {
        inner_.swiglu_oai(g, u, alpha, limit, y);
    }

   private:
    backends::Backend& inner_;
};

// A model on `n_devices` CPU backends split by `ratios`, each with its own thread count (the
// CPU's results do not depend on it).
test::DeviceModel cpu_model(const std::string& stem, size_t n_devices, const std::string& ratios, const EngineOptions& opt = {}) {
    test::DeviceModel m;
    std::vector<backends::Backend*> raw;
    for (size_t i = 0; i < n_devices; ++i) {
        m.backends.push_back(std::make_unique<backends::cpu::CpuBackend>(static_cast<int>(1 + i)));
        raw.push_back(m.backends.back().get());
    }
    models::ModelInfo info = models::load_model(shared_path("models/" + stem + ".gguf"));
    std::vector<DeviceLayers> layers = split_layers(info, ratios, raw);
    m.model = std::make_unique<Model>(std::move(info), std::move(layers), opt);
    return m;
}

// Logits of every position of prompt + greedy tokens, fed in one batch per case.
std::vector<float> all_logits(Model& model, const test::ReferenceRun& ref) {
    std::vector<float> all;
    for (size_t c = 0; c < ref.cases.size(); ++c) {
        std::vector<int32_t> tokens = ref.cases[c].prompt_tokens;
        tokens.insert(tokens.end(), ref.cases[c].greedy_tokens.begin(), ref.cases[c].greedy_tokens.end());
        std::vector<BatchToken> batch;
        for (size_t i = 0; i < tokens.size(); ++i) batch.push_back({static_cast<int32_t>(c), tokens[i], static_cast<int32_t>(i), true});
        const auto l = model.decode(batch);
        all.insert(all.end(), l.begin(), l.end());
    }
    return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("greedy generation on cpu,cpu equals one cpu and llama.cpp", "[engine][split]") {
    for (const char* stem : {"stories260K", "synth-k"}) {
        const test::ReferenceRun ref = test::load_reference(stem);
        test::DeviceModel one = cpu_model(stem, 1, "");
        struct Split {
            size_t n;
            const char* ratios;
        };
        for (const Split& s : {Split{2, "1,1"}, Split{2, "3,1"}, Split{3, "1,1,1"}}) {
            test::DeviceModel split = cpu_model(stem, s.n, s.ratios);
            REQUIRE(split.model->devices().size() == s.n);
            for (size_t c = 0; c < ref.cases.size(); ++c) {
                const test::ReferenceCase& rc = ref.cases[c];
                INFO(stem << " split " << s.ratios << " prompt " << c);
                const auto seq = static_cast<int32_t>(c);
                const std::vector<int32_t> expected = greedy(*one.model, seq, rc.prompt_tokens, rc.greedy_tokens.size());
                const std::vector<int32_t> got = greedy(*split.model, seq, rc.prompt_tokens, rc.greedy_tokens.size());
                CHECK(got == expected);
                // llama.cpp's tokens up to the first one its own builds may flip (reference_check.h, kGreedyGap).
                const size_t required = test::greedy_required(ref, c);
                CHECK(std::vector<int32_t>(got.begin(), got.begin() + required) ==
                      std::vector<int32_t>(rc.greedy_tokens.begin(), rc.greedy_tokens.begin() + required));
                one.model->truncate(seq, 0);
            }
        }
    }
}

TEST_CASE("split logits are bit-equal to one device's", "[engine][split]") {
    for (const char* stem : {"stories260K", "synth-k", "synth-k-q4_k_m", "synth-gemma3-q8_0"}) {
        const test::ReferenceRun ref = test::load_reference(stem);
        test::DeviceModel one = cpu_model(stem, 1, "");
        const std::vector<float> expected = all_logits(*one.model, ref);
        for (const char* ratios : {"1,1", "3,1", "1,3"}) {
            test::DeviceModel split = cpu_model(stem, 2, ratios);
            INFO(stem << " split " << ratios);
            CHECK(same_bits(all_logits(*split.model, ref), expected));
        }
    }
}

TEST_CASE("fork, truncate and mixed batches work across devices", "[engine][split]") {
    // The same script on one device and on three: fork at a position inside a block (the shared
    // partial block is copied on every device when written), continue both sequences in one
    // batch, truncate and redo. Every logit must match.
    const test::ReferenceRun ref = test::load_reference("stories260K");
    const std::vector<int32_t>& a = ref.cases[3].prompt_tokens;  // 14 tokens
    const std::vector<int32_t>& b = ref.cases[0].prompt_tokens;
    EngineOptions opt;
    opt.cache.block_size = 4;
    opt.cache.n_positions = 96;
    const auto script = [&](Model& m) {
        std::vector<float> out;
        const auto keep = [&](std::span<const float> l) { out.insert(out.end(), l.begin(), l.end()); };
        std::vector<BatchToken> batch;
        for (size_t i = 0; i < a.size(); ++i) batch.push_back({0, a[i], static_cast<int32_t>(i), true});
        keep(m.decode(batch));
        m.fork(0, 1, 6);
        m.truncate(0, 9);
        batch.clear();
        for (size_t i = 0; i < b.size(); ++i) {
            batch.push_back({0, b[i], static_cast<int32_t>(9 + i), true});
            batch.push_back({1, b[b.size() - 1 - i], static_cast<int32_t>(6 + i), true});
        }
        keep(m.decode(batch));
        m.truncate(1, 0);
        keep(m.decode(std::vector<BatchToken>{{1, a[0], 0, true}, {2, a[1], 0, true}}));
        return out;
    };
    test::DeviceModel one = cpu_model("stories260K", 1, "", opt);
    test::DeviceModel three = cpu_model("stories260K", 3, "2,2,1", opt);
    CHECK(three.model->devices()[2].layer_end - three.model->devices()[2].layer_begin == 1);
    CHECK(same_bits(script(*three.model), script(*one.model)));
}

TEST_CASE("the plan's bytes per device are what the engine allocates", "[engine][split]") {
    // stories260K has its own output head; synth-gemma3 ties it to the embedding, which the
    // last device then needs a copy of.
    for (const char* stem : {"stories260K", "synth-gemma3"}) {
        models::ModelInfo info = models::load_model(shared_path(std::string("models/") + stem + ".gguf"));
        EngineOptions opt;
        opt.n_batch = 64;
        opt.cache.n_positions = 200;
        const MemoryNeeds needs = memory_needs(info, opt.cache, opt.n_batch);
        for (const char* ratios : {"1", "1,1", "1,2,1"}) {
            const SplitSpec split = parse_split(ratios);
            std::vector<PlanDevice> devices(split.ratios.size(), PlanDevice{"cpu", uint64_t{1} << 40});
            for (size_t i = 0; i < devices.size(); ++i) devices[i].name += std::to_string(i);
            const Plan plan = plan_placement(needs, devices, split);
            std::vector<std::unique_ptr<backends::cpu::CpuBackend>> cpus;
            std::vector<std::unique_ptr<CountingBackend>> counters;
            std::vector<DeviceLayers> layers;
            for (const DevicePlan& d : plan.devices) {
                cpus.push_back(std::make_unique<backends::cpu::CpuBackend>(1));
                counters.push_back(std::make_unique<CountingBackend>(*cpus.back()));
                layers.push_back({counters.back().get(), d.layer_begin, d.layer_end});
            }
            Model model(info, layers, opt);
            for (size_t i = 0; i < plan.devices.size(); ++i) {
                INFO(stem << " split " << ratios << " device " << i);
                CHECK(counters[i]->bytes == plan.devices[i].total_bytes());
            }
        }
    }
}

TEST_CASE("bad layer ranges are rejected before anything is placed", "[engine][split]") {
    const models::ModelInfo info = models::load_model(shared_path("models/stories260K.gguf"));  // 5 layers
    backends::cpu::CpuBackend a(1), b(1);
    CHECK_THROWS_WITH(Model(info, std::vector<DeviceLayers>{{&a, 0, 2}, {&b, 3, 5}}), Catch::Contains("do not continue at layer 2"));
    CHECK_THROWS_WITH(Model(info, std::vector<DeviceLayers>{{&a, 0, 2}, {&b, 2, 4}}), Catch::Contains("the model has 5"));
    CHECK_THROWS_WITH(Model(info, std::vector<DeviceLayers>{{&a, 0, 5}, {&b, 5, 5}}), Catch::Contains("at least one layer"));
    CHECK_THROWS_WITH(Model(info, std::vector<DeviceLayers>{{nullptr, 0, 5}}), Catch::Contains("no backend"));
    CHECK_THROWS_WITH(Model(info, std::vector<DeviceLayers>{}), Catch::Contains("no devices"));
}

TEST_CASE("a device that cannot run a tensor's or the cache's type is refused before anything loads", "[engine][split]") {
    const models::ModelInfo info = models::load_model(shared_path("models/stories260K-q8_0.gguf"));
    backends::cpu::CpuBackend cpu(1);
    CountingBackend first(cpu), second(cpu);
    second.refuse = quant::TypeId::Q8_0;
    const int64_t half = info.hparams.n_layer / 2;
    // The second device gets Q8_0 tensors (its layers, the output head) it says it cannot run: the
    // error names a tensor, the type and the op, and neither device allocated a byte.
    CHECK_THROWS_WITH(Model(info, {{&first, 0, half}, {&second, half, info.hparams.n_layer}}),
                      Catch::Contains("tensor '") && Catch::Contains("is q8_0") && Catch::Contains("no matmul for q8_0"));
    CHECK(first.bytes + second.bytes == 0);
    // A cache type the device refuses (an F32 model, so only the cache is Q8_0).
    const models::ModelInfo f32 = models::load_model(shared_path("models/stories260K.gguf"));
    EngineOptions q8_cache;
    q8_cache.cache.type_k = quant::TypeId::Q8_0;
    CHECK_THROWS_WITH(Model(f32, {{&second, 0, f32.hparams.n_layer}}, q8_cache),
                      Catch::Contains("the K cache is q8_0") && Catch::Contains("no set_rows"));
    CHECK(second.bytes == 0);
    // What it supports loads.
    second.refuse.reset();
    Model ok(info, {{&first, 0, half}, {&second, half, info.hparams.n_layer}});
    CHECK(first.bytes > 0);
    CHECK(second.bytes > 0);
}

}  // namespace deskside::engine
