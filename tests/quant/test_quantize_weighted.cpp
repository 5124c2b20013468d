// The importance-weighted quantizers against llama-quantize's bytes.
//
// Every tensor of a file llama-quantize made from synth-k.gguf is quantized again here from the F32
// original, with the weights importance_weights() gives for it from synth-k.imatrix (per expert
// for stacked experts; none where the imatrix has no entry, as llama-quantize), into the type
// llama-quantize chose for it, and the bytes must be equal. Three sources of such files:
//   - synth-k-iq4_nl / -iq4_xs (../shared/models, made without an imatrix): IQ4's only quantizer
//     is the weighted search, run with x^2 weights;
//   - synth-k-iq* (made with synth-k.imatrix): their Q4_K attn_v tensors are weighted;
//   - the peer llama-quantize (scripts/build-llama-cpp.sh), run here with --imatrix for every type
//     that has a weighted quantizer.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "models/imatrix_file.h"
#include "quant/quantize_rows.h"
#include "quant/types.h"
#include "support/paths.h"
#include "support/process.h"
#include "support/required.h"

namespace q = deskside::quant;
namespace m = deskside::models;
using q::TypeId;

namespace {

struct Compared {
    int weighted = 0;  // tensors quantized with importance weights
    int plain = 0;     // tensors quantized without (no imatrix entry, or a type that ignores it)
};

std::string first_difference(const std::vector<uint8_t>& ours, const uint8_t* theirs, size_t block_bytes) {
    for (size_t i = 0; i < ours.size(); ++i) {
        if (ours[i] != theirs[i])
            return "byte " + std::to_string(i) + " (block " + std::to_string(i / block_bytes) + ")";
    }
    return {};
}

// Re-quantizes every quantized tensor of `quantized` from `f32` and checks the bytes.
Compared compare_with(const m::GgufFile& f32, const m::Imatrix* imatrix, const m::GgufFile& quantized) {
    Compared c;
    for (const m::GgufTensorInfo& t : quantized.tensors()) {
        if (t.type == TypeId::F32) continue;  // llama-quantize copies these
        INFO(quantized.path() << ": " << t.name << " (" << q::type_info(t.type).name << ")");
        REQUIRE(q::can_quantize(t.type, imatrix != nullptr));
        const m::GgufTensorInfo* src = f32.find_tensor(t.name);
        REQUIRE(src != nullptr);
        REQUIRE(src->type == TypeId::F32);
        const int64_t n_per_row = t.shape[0];
        const int64_t n_mat = t.shape.size() > 2 ? t.shape[2] : 1;
        const int64_t rows_per_mat = t.n_elements() / n_per_row / n_mat;
        const m::ImatrixEntry* entry = imatrix ? imatrix->find(t.name) : nullptr;
        if (entry) {
            REQUIRE(entry->n_per_row == n_per_row);
            REQUIRE(entry->n_mat == n_mat);
        }
        const size_t mat_bytes = q::row_bytes(t.type, n_per_row) * static_cast<size_t>(rows_per_mat);
        std::vector<uint8_t> ours(mat_bytes * static_cast<size_t>(n_mat));
        const auto* x = reinterpret_cast<const float*>(src->data);
        for (int64_t e = 0; e < n_mat; ++e) {
            const std::vector<float> w = entry ? m::importance_weights(*entry, e) : std::vector<float>{};
            q::quantize_rows(t.type, x + e * rows_per_mat * n_per_row, ours.data() + e * mat_bytes, rows_per_mat,
                             n_per_row, entry ? w.data() : nullptr);
        }
        REQUIRE(ours.size() == t.n_bytes);
        CHECK(first_difference(ours, t.data, q::type_info(t.type).block_bytes) == "");
        ++(entry ? c.weighted : c.plain);
    }
    return c;
}

std::optional<std::string> peer_quantize() {
    if (const char* bin = std::getenv("DESKSIDE_PEER_BIN"); bin && *bin) return std::string(bin) + "/llama-quantize";
    const char* home = std::getenv("HOME");
    const char* dir = std::getenv("DESKSIDE_PEER_DIR");
    const std::filesystem::path peer =
        dir && *dir ? std::string(dir) : std::string(home ? home : "") + "/.cache/deskside/peer";
    std::error_code ec;
    for (const auto& d : std::filesystem::directory_iterator(peer, ec)) {
        const std::filesystem::path tool = d.path() / "bin" / "llama-quantize";
        if (d.path().filename().string().rfind("build-", 0) == 0 && std::filesystem::exists(tool)) return tool.string();
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("IQ4_NL and IQ4_XS without an imatrix equal llama-quantize's files", "[imatrix][quant]") {
    const std::string base = deskside::test::shared_path("models/synth-k.gguf");
    if (!deskside::test::model_or_skip(base, "the IQ4 comparison", "../shared/models")) return;
    const m::GgufFile f32 = m::GgufFile::open(base);
    for (const char* name : {"synth-k-iq4_nl.gguf", "synth-k-iq4_xs.gguf"}) {
        const m::GgufFile quantized = m::GgufFile::open(deskside::test::shared_path(std::string("models/") + name));
        int iq4 = 0;
        for (const m::GgufTensorInfo& t : quantized.tensors())
            iq4 += t.type == TypeId::IQ4_NL || t.type == TypeId::IQ4_XS;
        const Compared c = compare_with(f32, nullptr, quantized);
        CHECK(iq4 >= 20);  // the layer matrices: 4 layers x 7
        CHECK(c.plain == static_cast<int>(quantized.tensors().size()) - 9);  // all but the 9 F32 norms
    }
}

TEST_CASE("Weighted Q4_K in llama-quantize's i-quant files", "[imatrix][quant]") {
    const std::string base = deskside::test::shared_path("models/synth-k.gguf");
    if (!deskside::test::model_or_skip(base, "the weighted comparison", "../shared/models")) return;
    const m::GgufFile f32 = m::GgufFile::open(base);
    const m::Imatrix imatrix = m::read_imatrix(deskside::test::shared_path("models/synth-k.imatrix"));
    // Their other matrices are i-quants deskside does not write.
    int weighted = 0;
    for (const char* name : {"synth-k-iq2_xxs.gguf", "synth-k-iq2_xs.gguf", "synth-k-iq1_s.gguf"}) {
        const m::GgufFile quantized = m::GgufFile::open(deskside::test::shared_path(std::string("models/") + name));
        for (const m::GgufTensorInfo& t : quantized.tensors()) {
            if (t.type != TypeId::Q4_K) continue;
            INFO(name << ": " << t.name);
            const m::ImatrixEntry* entry = imatrix.find(t.name);
            REQUIRE(entry != nullptr);
            const std::vector<float> w = m::importance_weights(*entry);
            std::vector<uint8_t> ours(t.n_bytes);
            const m::GgufTensorInfo* src = f32.find_tensor(t.name);
            REQUIRE(src != nullptr);
            q::quantize_rows(TypeId::Q4_K, reinterpret_cast<const float*>(src->data), ours.data(),
                             t.n_elements() / t.shape[0], t.shape[0], w.data());
            CHECK(first_difference(ours, t.data, q::type_info(TypeId::Q4_K).block_bytes) == "");
            ++weighted;
        }
    }
    CHECK(weighted == 12);  // attn_v of 4 layers in each of the three files
}

TEST_CASE("Every weighted quantizer equals llama-quantize --imatrix", "[imatrix][quant][peer]") {
    const std::string base = deskside::test::shared_path("models/synth-k.gguf");
    const std::string im_path = deskside::test::shared_path("models/synth-k.imatrix");
    if (!deskside::test::model_or_skip(base, "the peer comparison", "../shared/models")) return;
    const std::optional<std::string> tool = peer_quantize();
    if (!deskside::test::model_or_skip(tool.value_or(""), "the peer comparison (llama-quantize)",
                                       "scripts/build-llama-cpp.sh builds it"))
        return;
    const m::GgufFile f32 = m::GgufFile::open(base);
    const m::Imatrix imatrix = m::read_imatrix(im_path);
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("deskside-imatrix-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    for (const char* type : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL",
                             "IQ4_XS"}) {
        SECTION(type) {
            const std::string out = (dir / (std::string(type) + ".gguf")).string();
            const deskside::test::ProcessResult r =
                deskside::test::run_process({*tool, "--imatrix", im_path, base, out, type, "2"});
            INFO(r.err);
            REQUIRE(r.exit_code == 0);
            const Compared c = compare_with(f32, &imatrix, m::GgufFile::open(out));
            CHECK(c.weighted == 28);  // every layer matrix has an entry
            std::filesystem::remove(out);
        }
    }
    std::filesystem::remove_all(dir);
}
