// What the CUDA backend does beyond the ops (test_backend_ops.cpp compares those with the CPU):
// steps recorded between begin_step and end_step run eagerly the first time, are captured as a
// graph the second, and replay it afterwards, with the bytes of the eager backend every time;
// allocation failures name the device and the way out; the registry lists the compute capability.
// Without a CUDA device each test WARNs and returns, unless DESKSIDE_REQUIRE_DEVICES names cuda0.
#include <catch2/catch.hpp>

#if DESKSIDE_HAS_CUDA

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_registry.h"
#include "op_harness.h"
#include "support/index_args.h"
#include "support/scoped_env.h"

namespace deskside::backends {
namespace {

using quant::TypeId;
using test::DeviceTensor;
using test::random_values;

bool have_cuda() {
    std::string why;
    if (!cuda::list_cuda_devices(&why).empty()) return true;
    const std::vector<std::string> required = test::required_devices();
    if (std::find(required.begin(), required.end(), "cuda0") != required.end()) FAIL("cuda0 is required: " << why);
    WARN("no CUDA device: " << why);
    return false;
}

std::vector<uint8_t> bytes_of(Backend& be, const Tensor& t) {
    std::vector<uint8_t> out(t.buffer->size());
    be.download(*t.buffer, 0, out.data(), out.size());
    return out;
}

// One step shaped like a layer: norm, Q8_0 matmul, rope, silu, add, a KV-cache write. Its
// inputs are uploaded before the step (new values each time, the same buffers), as the engine's.
struct MiniStep {
    static constexpr int64_t kEmbd = 256, kHeads = 4, kHeadDim = 64, kTokens = 3, kCacheRows = 16, kCtx = 64;
    Backend& be;
    std::unique_ptr<Buffer> w_buf;
    DeviceTensor x, norm_w, h, q, cache;
    test::IndexTensor positions, rows;

    explicit MiniStep(Backend& backend)
        : be(backend),
          x(be, TypeId::F32, kEmbd, kTokens, random_values(kEmbd * kTokens, 1)),
          norm_w(be, TypeId::F32, kEmbd, 1, random_values(kEmbd, 2)),
          h(be, TypeId::F32, kEmbd, kTokens),
          q(be, TypeId::F32, kEmbd, kTokens),
          cache(be, TypeId::F16, kEmbd, kCacheRows),
          positions(test::index_tensor(be, {0, 1, 2})),
          rows(test::index_tensor(be, {0, 1, 2})) {
        const std::vector<float> w = random_values(kEmbd * kEmbd, 3);
        std::vector<uint8_t> wq(quant::row_bytes(TypeId::Q8_0, kEmbd) * kEmbd);
        quant::quant_traits(TypeId::Q8_0)->from_float(w.data(), wq.data(), kEmbd * kEmbd);
        w_buf = be.map_weight_matrix(wq.data(), TypeId::Q8_0, kEmbd, kEmbd);
    }

    void run(uint32_t seed, int32_t first_pos) {
        const std::vector<float> xv = random_values(kEmbd * kTokens, seed);
        be.upload(*x.t().buffer, x.t().offset, xv.data(), xv.size() * sizeof(float));
        const int32_t pos[kTokens] = {first_pos, first_pos + 1, first_pos + 2};
        be.upload(*positions.buffer, 0, pos, sizeof(pos));
        be.upload(*rows.buffer, 0, pos, sizeof(pos));
        RopeParams rp;
        rp.n_head = kHeads;
        rp.head_dim = kHeadDim;
        rp.n_rot = kHeadDim;
        rp.n_ctx = kCtx;
        be.begin_step();
        be.rms_norm(x.t(), norm_w.t(), 1e-5f, h.t());
        be.matmul(make_tensor(w_buf.get(), 0, TypeId::Q8_0, kEmbd, kEmbd), h.t(), q.t());
        be.rope(q.t(), positions, rp);
        be.silu(q.t(), h.t());
        be.add(h.t(), x.t(), h.t());
        be.set_rows(h.t(), cache.t(), rows);
        be.end_step();
    }
};

TEST_CASE("cuda: a step runs eagerly, then is captured, then replays, with the eager bytes", "[cuda-backend]") {
    if (!have_cuda()) return;
    std::unique_ptr<cuda::CudaBackend> graphed, eager;
    {
        test::ScopedEnv on("DESKSIDE_CUDA_GRAPHS", "1");
        graphed = std::make_unique<cuda::CudaBackend>(0, "cuda0");
    }
    {
        test::ScopedEnv off("DESKSIDE_CUDA_GRAPHS", "0");
        eager = std::make_unique<cuda::CudaBackend>(0, "cuda0");
    }
    {
        MiniStep g(*graphed), e(*eager);
        for (int i = 0; i < 5; ++i) {
            INFO("step " << i);
            g.run(10 + i, 3 * i);
            e.run(10 + i, 3 * i);
            CHECK(bytes_of(*graphed, g.h.t()) == bytes_of(*eager, e.h.t()));
            CHECK(bytes_of(*graphed, g.cache.t()) == bytes_of(*eager, e.cache.t()));
        }
    }
    const cuda::CudaBackend::GraphStats& s = graphed->graph_stats();
    CHECK(s.eager == 1);
    CHECK(s.captured == 1);
    CHECK(s.replayed == 3);
    CHECK(s.refused == 0);
    CHECK(eager->graph_stats().captured == 0);
}

TEST_CASE("cuda: an allocation beyond the device's share names the device and what would fit", "[cuda-backend]") {
    if (!have_cuda()) return;
    cuda::CudaBackend be(0, "cuda7", 1u << 20);
    std::unique_ptr<Buffer> fits = be.alloc(512u << 10);
    try {
        be.alloc(1u << 20);
        FAIL("the allocation beyond the share succeeded");
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        CHECK(what.find("cuda7") != std::string::npos);
        CHECK(what.find(std::to_string(1u << 20)) != std::string::npos);
        CHECK(what.find("would fit") != std::string::npos);
    }
}

TEST_CASE("cuda: the registry lists compute capability and versions, and splits memory", "[cuda-backend]") {
    if (!have_cuda()) return;
    const std::vector<DeviceInfo> one = cuda::list_cuda_devices();
    REQUIRE(!one.empty());
    const auto has_prefix = [&](const DeviceInfo& d, const std::string& p) {
        return std::any_of(d.features.begin(), d.features.end(),
                           [&](const std::string& f) { return f.rfind(p, 0) == 0; });
    };
    CHECK(has_prefix(one[0], "sm_"));
    CHECK(has_prefix(one[0], "cuda-driver="));
    test::ScopedEnv split("DESKSIDE_CUDA_SPLIT", "2");
    const std::vector<DeviceInfo> two = cuda::list_cuda_devices();
    REQUIRE(two.size() == 2 * one.size());
    CHECK(two[1].name == "cuda1");
    CHECK(two[0].total_memory == one[0].total_memory / 2);
    test::ScopedEnv bad("DESKSIDE_CUDA_SPLIT", "17");
    CHECK_THROWS_WITH(cuda::cuda_split(), Catch::Contains("DESKSIDE_CUDA_SPLIT"));
}

}  // namespace
}  // namespace deskside::backends

#endif  // DESKSIDE_HAS_CUDA
