// Our quantizers and dequantizers against files made by llama.cpp's llama-quantize (no
// importance matrix): stories260K (a real trained model, F32) and synth-k (random weights shaped
// for the K-quants, F32), each next to its quantized copies in ../shared/models.
//
// (a) Dequantizing every quantized tensor lands close to the F32 original (relative RMSE bound
//     per type, from the Gaussian derivation in test_quant_roundtrip.cpp with extra headroom
//     because trained weights have heavier tails).
// (b) Quantizing the F32 original with quantize_rows (what `deskside quantize` runs) reproduces
//     llama-quantize's bytes exactly, for every type in these files, IQ4_NL and IQ4_XS included.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "quant/quant.h"
#include "quant/quantize_rows.h"
#include "quant/types.h"
#include "support/paths.h"

namespace q = deskside::quant;
using deskside::models::GgufFile;
using deskside::models::GgufTensorInfo;
using q::TypeId;

namespace {

double dequant_bound(TypeId type) {
    switch (type) {
        case TypeId::F16: return 5e-4;
        case TypeId::BF16: return 4e-3;
        case TypeId::Q8_0: return 0.01;
        case TypeId::Q6_K: return 0.03;
        case TypeId::Q5_0:
        case TypeId::Q5_1:
        case TypeId::Q5_K: return 0.07;
        case TypeId::Q4_0:
        case TypeId::Q4_1:
        case TypeId::Q4_K:
        case TypeId::IQ4_NL:
        case TypeId::IQ4_XS: return 0.13;
        case TypeId::Q3_K: return 0.22;
        case TypeId::Q2_K: return 0.40;
        default: return 0;  // a type we did not expect in these files fails the check
    }
}

struct PairStats {
    int dequantized = 0;  // tensors checked by (a)
    int compared = 0;     // tensors checked by (b)
};

// First block index where two byte images differ, or -1.
int64_t first_mismatch(const uint8_t* a, const uint8_t* b, size_t n_bytes, size_t block_bytes) {
    for (size_t i = 0; i < n_bytes; ++i) {
        if (a[i] != b[i]) return static_cast<int64_t>(i / block_bytes);
    }
    return -1;
}

PairStats check_pair(const std::string& base_name, const std::string& quant_name) {
    const GgufFile base = GgufFile::open(deskside::test::shared_path("models/" + base_name));
    const GgufFile quant = GgufFile::open(deskside::test::shared_path("models/" + quant_name));
    PairStats stats;
    for (const GgufTensorInfo& t : quant.tensors()) {
        const GgufTensorInfo* ref = base.find_tensor(t.name);
        REQUIRE(ref != nullptr);
        REQUIRE(ref->type == TypeId::F32);
        REQUIRE(ref->n_elements() == t.n_elements());
        if (t.type == TypeId::F32) continue;  // norms stay F32
        INFO(quant_name << " " << t.name << " " << q::type_info(t.type).name);
        const q::QuantTraits* traits = q::quant_traits(t.type);
        REQUIRE(traits != nullptr);
        const int64_t n = t.n_elements();
        const auto* x = reinterpret_cast<const float*>(ref->data);

        std::vector<float> back(static_cast<size_t>(n));
        traits->to_float(t.data, back.data(), n);
        double err = 0, sig = 0;
        for (int64_t i = 0; i < n; ++i) {
            err += (double(back[i]) - x[i]) * (double(back[i]) - x[i]);
            sig += double(x[i]) * x[i];
        }
        CHECK(std::sqrt(err / sig) < dequant_bound(t.type));
        ++stats.dequantized;

        std::vector<uint8_t> ours(t.n_bytes);
        const int64_t n_per_row = t.shape[0];
        REQUIRE(q::quantize_rows(t.type, x, ours.data(), n / n_per_row, n_per_row, nullptr) == t.n_bytes);
        const int64_t bad_block = first_mismatch(ours.data(), t.data, t.n_bytes, q::type_info(t.type).block_bytes);
        INFO("first differing block: " << bad_block);
        CHECK(bad_block == -1);
        ++stats.compared;
    }
    return stats;
}

}  // namespace

TEST_CASE("stories260K: llama-quantize's tensors dequantize close and requantize bit-exact", "[quant][gguf]") {
    for (const char* suffix : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "f16", "bf16"}) {
        const std::string name = std::string("stories260K-") + suffix + ".gguf";
        SECTION(name) {
            const PairStats stats = check_pair("stories260K.gguf", name);
            CHECK(stats.dequantized >= 30);  // 48 tensors, most of them matrices
            CHECK(stats.compared == stats.dequantized);
        }
    }
}

TEST_CASE("synth-k: llama-quantize's K-quant mixes dequantize close and requantize bit-exact", "[quant][gguf]") {
    for (const char* suffix : {"q2_k", "q3_k_m", "q4_k_s", "q4_k_m", "q5_k_m", "q6_k", "q8_0", "iq4_nl", "iq4_xs"}) {
        const std::string name = std::string("synth-k-") + suffix + ".gguf";
        SECTION(name) {
            const PairStats stats = check_pair("synth-k.gguf", name);
            CHECK(stats.dequantized >= 25);
            CHECK(stats.compared == stats.dequantized);
        }
    }
}
