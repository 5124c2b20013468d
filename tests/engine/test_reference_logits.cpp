// The forward pass on the CPU against llama.cpp's reference runs on the same files, judged by
// SPREAD.md's yardstick (reference_check.h, llama_cpp_spread.h): teacher-forced mean KL and top-1
// disagreement no worse than llama.cpp's own two builds, argmax equal where the reference's top-2
// gap exceeds 0.5, free-running greedy tokens equal up to the first gap below 0.35. Every file at
// every instruction-set level this CPU has (each level in its own test case; a level other than
// the process's runs in a child process with DESKSIDE_CPU_ISA set).
#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/model.h"
#include "models/model.h"
#include "reference_check.h"

namespace deskside::engine {
namespace {

using backends::cpu::CpuIsa;
using test::load_reference;
using test::shared_path;

// Every reference file on the CPU at `isa`.
void check_every_file(CpuIsa isa) {
    test::at_cpu_isa(isa, [] { test::check_reference_files({"cpu"}); });
}

}  // namespace

TEST_CASE("cpu at the scalar level: every reference file is as close to llama.cpp as its own builds",
          "[engine][reference]") {
    check_every_file(CpuIsa::Scalar);
}

TEST_CASE("cpu at the avx2 level: every reference file is as close to llama.cpp as its own builds",
          "[engine][reference]") {
    check_every_file(CpuIsa::Avx2);
}

TEST_CASE("cpu at the avx512 level: every reference file is as close to llama.cpp as its own builds",
          "[engine][reference]") {
    check_every_file(CpuIsa::Avx512);
}

TEST_CASE("a Q8_0 KV cache stays as close to llama.cpp's F16-cache logits as quantized weights do",
          "[engine][reference]") {
    // The reference was computed with an F16 cache; Q8_0 K and V add quantization noise of the
    // size quantized weights do, and SPREAD.md has no llama.cpp run with a Q8_0 cache. So synth-k
    // (F32 weights) with a Q8_0 cache is held to the worst of llama.cpp's builds over every file of
    // SPREAD.md (a quantized one: mean KL about 2e-3, top-1 about 97 %), plus the argmax and greedy
    // rules, which do not depend on the file.
    EngineOptions opt;
    opt.cache.type_k = quant::TypeId::Q8_0;
    opt.cache.type_v = quant::TypeId::Q8_0;
    const test::ReferenceRun ref = load_reference("synth-k");
    test::DeviceModel m = test::open_model(shared_path("models/synth-k.gguf"), {"cpu"}, "", opt);
    const test::Closeness d = test::measure_closeness(*m.model, ref);
    double worst_kl = 0, worst_top1 = 0, worst_max_abs = 0;
    for (const auto& [stem, s] : test::llama_cpp_spread_table()) {
        for (const test::SpreadCell& cell : {s.reference_build, s.avx2_build}) {
            worst_kl = std::max(worst_kl, cell.mean_kl + cell.mean_kl_rounding);
            const double share = static_cast<double>(cell.top1_disagreements) / static_cast<double>(s.rows);
            worst_top1 = std::max(worst_top1, share);
            worst_max_abs = std::max(worst_max_abs, cell.max_abs);
        }
    }
    INFO("synth-k with a Q8_0 cache: " << test::closeness_table_row("synth-k", "cpu", d)
                                       << "worst of llama.cpp: mean KL " << worst_kl << ", top-1 disagreement "
                                       << worst_top1 << ", max abs " << worst_max_abs << "\n"
                                       << d.greedy_failures);
    CHECK(d.mean_kl <= worst_kl);
    CHECK(static_cast<double>(d.top1_disagreements) / static_cast<double>(d.rows) <= worst_top1);
    CHECK(d.argmax_mismatches == 0);
    CHECK(d.greedy_failures.empty());
    CHECK(d.max_abs <= test::kSanityFactor * worst_max_abs);
    // stories260K's heads (8 values) cannot be cut into Q8_0 blocks of 32: a clear error.
    backends::cpu::CpuBackend backend(1);
    CHECK_THROWS_WITH(Model(models::load_model(shared_path("models/stories260K.gguf")), backend, opt),
                      Catch::Contains("multiples of 32"));
}

// `deskside_tests "[closeness-table]"` prints the CPU's rows of the table in docs/ENGINE.md, at
// every level this CPU has (scripts/closeness-table.sh adds vulkan0's).
TEST_CASE("closeness table: every reference file on the cpu", "[engine][.closeness-table]") {
    if (!test::in_isa_child()) std::cout << test::closeness_table_header() << std::flush;
    for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512}) {
        const std::string where = "cpu " + std::string(backends::cpu::isa_name(isa));
        test::at_cpu_isa(isa, [&where] { test::print_closeness_rows({"cpu"}, where); });
    }
}

}  // namespace deskside::engine
