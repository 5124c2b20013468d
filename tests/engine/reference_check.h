// Running a model on devices opened by name (as `--devices` opens them, split by the placement
// plan) and judging it against llama.cpp's reference runs (reference_cases.h) by SPREAD.md's
// yardstick (llama_cpp_spread.h): teacher-forced logits at every position, free-running greedy
// generation. Shared by the CPU, Vulkan and CUDA reference tests and the split tests, so every
// device and every CPU instruction-set level is held to the same bar.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/dot_kernels.h"
#include "engine/model.h"
#include "models/model.h"
#include "llama_cpp_spread.h"
#include "reference_cases.h"

namespace deskside::test {

// Threads of a "cpu" device opened by these helpers.
constexpr int kCpuThreads = 2;

// The device `name` opened with backends::open_device (as `--devices` opens it) once per process
// (and per DESKSIDE_VULKAN_SPLIT / _EXACT value) and kept open: a Vulkan device compiles its pipelines on
// first use, which on lavapipe costs far more than running these small models.
backends::Backend& shared_device(const std::string& name);

// A model and the devices it runs on (`backends` owns any that are not shared; `model` is
// declared last so it is destroyed before them).
struct DeviceModel {
    std::vector<std::unique_ptr<backends::Backend>> backends;
    std::unique_ptr<engine::Model> model;
};

// Layer ranges for `ratios` ("" = the plan's default: everything on one device, or even shares)
// from the placement plan, on `backends` (memory is not the question here: every device is
// given 1 TiB).
std::vector<engine::DeviceLayers> split_layers(const models::ModelInfo& info, const std::string& ratios,
                                               const std::vector<backends::Backend*>& backends);

// Places `model_path` on the shared devices named `devices`, split by `ratios`.
DeviceModel open_model(const std::string& model_path, const std::vector<std::string>& devices,
                       const std::string& ratios = "", const engine::EngineOptions& options = {});

// Whether backends::list_devices() has a usable device of this name; WARNs that `what` is
// skipped when it does not (a machine without Vulkan skips these tests, never fails them).
bool device_or_skip(const std::string& name, const std::string& what);

int32_t argmax(const float* row, int64_t n);
// Top-1 minus top-2 of a row.
double top_gap(const float* row, int64_t n);

// Greedy continuation of `prompt` for n tokens on sequence `seq`.
std::vector<int32_t> greedy(engine::Model& model, int32_t seq, const std::vector<int32_t>& prompt, size_t n);

// Every reference file the engine is judged on, one line each: its bar comes from SPREAD.md's
// "Per file" row (llama_cpp_spread.h), so a file SPREAD.md lacks fails, and so does one whose
// architecture or types the engine cannot load (with the loader's error), never a skip.
inline constexpr const char* kReferenceFiles[] = {
    "stories260K",
    "stories260K-f16",
    "stories260K-bf16",
    "stories260K-q4_0",
    "stories260K-q4_1",
    "stories260K-q5_0",
    "stories260K-q5_1",
    "stories260K-q8_0",
    "synth-k",
    "synth-k-q2_k",
    "synth-k-q3_k_m",
    "synth-k-q4_k_s",
    "synth-k-q4_k_m",
    "synth-k-q5_k_m",
    "synth-k-q6_k",
    "synth-k-q8_0",
    "synth-k-iq4_nl",
    "synth-k-iq4_xs",
    "synth-qwen2",
    "synth-qwen2-q8_0",
    "synth-qwen2-q4_k_m",
    "synth-qwen2-q6_k",
    "synth-gemma3",
    "synth-gemma3-q8_0",
    "synth-gemma3-q4_k_m",
    "synth-gemma3-q6_k",
    "synth-qwen3-q8_0",
    "synth-qwen3-q4_k_m",
    "synth-qwen3moe-q8_0",
    "synth-qwen3moe-q4_k_m",
    "synth-phi3-q8_0",
    "synth-phi3-q4_k_m",
    "synth-gptoss-mxfp4_moe",
    "synth-gptoss-q4_k_m",
    "synth-k-iq1_s",
    "synth-k-iq1_m",
    "synth-k-iq2_xxs",
    "synth-k-iq2_xs",
    "synth-k-iq2_s",
    "synth-k-iq3_xxs",
    "synth-k-iq3_s",
    "synth-k-tq2_0",
};

// SPREAD.md's argmax rule: llama.cpp's own builds part from the reference's argmax only where its
// top-1/top-2 gap is below 0.342, so a teacher-forced argmax is compared where the gap exceeds this.
constexpr double kArgmaxGap = 0.5;
// Free-running greedy tokens must equal the reference's up to the first one whose reference gap is
// below this (llama.cpp's largest flipped gap, 0.342, rounded up); after it they may part.
constexpr double kGreedyGap = 0.35;

// How close a model is to a reference run. Teacher-forced: prompt_tokens + greedy_tokens[:-1] of
// each case in one batch, every row compared (SPREAD.md, "The teacher-forced comparison").
struct Closeness {
    int64_t rows = 0;
    double max_abs = 0;                // over every logit of every row
    double mean_row_max = 0;           // the mean over rows of each row's largest |difference|
    double mean_kl = 0;                // the mean over rows of KL(softmax(ref) || softmax(ours)), nats, float64
    int64_t top1_disagreements = 0;    // rows whose argmax differs from the reference's
    int64_t argmax_mismatches = 0;     // of those, rows where the reference's top-2 gap exceeds kArgmaxGap
    // Free-running greedy from each prompt, as many tokens as the reference generated, summed over cases:
    int64_t greedy_tokens = 0;         // tokens generated (the reference's count, or greedy_required's)
    int64_t greedy_required = 0;       // tokens before the first reference gap below kGreedyGap
    int64_t greedy_equal = 0;          // tokens equal to the reference's before the first difference
    std::string greedy_failures;       // per case that parted too early: where, and the gap there
};

// Measures `model` against `ref` (teacher-forced, then free-running greedy on the same sequences).
// The greedy runs stop after the tokens the check needs (greedy_required) unless `all_greedy`.
Closeness measure_closeness(engine::Model& model, const ReferenceRun& ref, bool all_greedy = false);

// Which parts of the bar `c` misses on `stem` ("" where it meets it all): "mean KL", "top-1",
// "argmax", "greedy", "max abs".
std::string missed_bar(const std::string& stem, const Closeness& c);

// Tokens of reference case `c` that a free-running greedy run must reproduce: those before the
// first generated token whose reference top-2 gap is below kGreedyGap.
size_t greedy_required(const ReferenceRun& ref, size_t c);

// Loads ../shared/models/<stem>.gguf on `devices`, measures it and CHECKs it against llama.cpp's
// spread on that file (closeness_bar): mean KL and top-1 disagreements at most the bar's, no argmax
// mismatch where the reference's gap exceeds kArgmaxGap, greedy equal up to kGreedyGap's point, and
// max abs under the gross-error bound. Returns the measurement (for the closeness table).
Closeness check_reference(const std::string& stem, const std::vector<std::string>& devices,
                          const engine::EngineOptions& options = {});

// check_reference for every file of kReferenceFiles; one that throws (does not load) fails with
// its error, and the others still run.
void check_reference_files(const std::vector<std::string>& devices);

// The closeness table (docs/ENGINE.md): its header, one file's row on `where` (with missed_bar),
// and every file's row on `devices` (all greedy tokens generated) printed to standard output.
std::string closeness_table_header();
std::string closeness_table_row(const std::string& stem, const std::string& where, const Closeness& c);
void print_closeness_rows(const std::vector<std::string>& devices, const std::string& where);

// The CPU's instruction-set levels (DESKSIDE_CPU_ISA), which a process picks once. Runs `body` at
// `isa`: here when this process runs at that level, else in a child of this test binary run with
// DESKSIDE_CPU_ISA=<isa> on the current test case alone (CHECKing that it passed, its output
// echoed; lines of its standard output that start with "| " are printed here); where the CPU lacks
// the level, WARNs that it is skipped. Never executes an instruction the CPU does not have.
// In such a child, `body` runs only at the child's own level (the parent runs the others).
void at_cpu_isa(backends::cpu::CpuIsa isa, const std::function<void()>& body);

// Whether models/STEM.gguf is in the shared directory; WARNs "not checked" when not. Only for the
// device checks that run on the GPU bundle, which carries the models that fit its size limit
// (scripts/gpu-bundle.sh); every other test needs its model.
bool present_or_warn(const std::string& stem);
// Whether this process is such a child.
bool in_isa_child();

// The Vulkan shader variants a reference check runs on vulkan0: `_exact` (DESKSIDE_VULKAN_EXACT=1,
// needs shaderFloat64; lavapipe's default) and plain (=0, GPUs' default).
struct VulkanVariant {
    const char* label;
    const char* exact;  // the DESKSIDE_VULKAN_EXACT value
};
inline constexpr VulkanVariant kVulkanVariants[] = {{"exact", "1"}, {"plain", "0"}};

// Runs `body` with vulkan0 opened as `v` says (DESKSIDE_VULKAN_EXACT set while it runs); WARNs and
// skips where vulkan0 is absent, or where `v` is the exact one and the device lacks shaderFloat64.
void with_vulkan_variant(const VulkanVariant& v, const std::function<void()>& body);

// Devices (with a --split) that one model runs on, for the greedy-equality checks.
struct Placement {
    std::vector<std::string> devices;
    std::string ratios;
};

// Greedy tokens of the first `n_cases` reference prompts of `stem` on every placement equal
// the CPU's (on failure: where they part, and the CPU's top-2 gap there).
void check_like_cpu(const std::string& stem, std::span<const Placement> placements, size_t n_cases = SIZE_MAX);

}  // namespace deskside::test
