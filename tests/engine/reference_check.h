// Running a model on devices opened by name (as `--devices` opens them, split by the placement
// plan) and checking it against llama.cpp's reference runs (reference_cases.h): teacher-forced
// logits at every position and greedy generation. Shared by the CPU and Vulkan reference tests
// and the split tests, so every device is held to the same checks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "engine/model.h"
#include "models/model.h"
#include "reference_cases.h"

namespace deskside::test {

// Threads of a "cpu" device opened by these helpers.
constexpr int kCpuThreads = 2;

// The device `name` opened with backends::open_device (as `--devices` opens it) once per process
// (and per DESKSIDE_VULKAN_SPLIT value) and kept open: a Vulkan device compiles its pipelines on
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

// How far a model's teacher-forced logits are from the reference's: the prompt plus the
// reference's greedy tokens in one batch per case, every position compared.
struct Deviation {
    double max_abs = 0;        // over every logit of every row
    double mean_row_max = 0;   // the mean over rows of each row's largest deviation
    int argmax_mismatches = 0; // rows whose reference top-2 gap exceeds `gap` but whose argmax differs
};
Deviation teacher_forced(engine::Model& model, const ReferenceRun& ref, double gap);

struct Tolerance {
    double max_abs;
    double mean_row_max;
};

// Bounds 1.3x what was measured: room for the last digits to move with a compiler or driver,
// still far below what a wrong RoPE, norm or scale does (several units on every row).
constexpr Tolerance measured(double max_abs, double mean_row_max) { return {1.3 * max_abs, 1.3 * mean_row_max}; }

// Issue #7's acceptance for quantized weights (1e-3 for float weights, which no model meets).
constexpr double kQuantAcceptance = 2e-2;
constexpr Tolerance kQuantAccepted{kQuantAcceptance, kQuantAcceptance};

// The groups the reference tests check one test case each.
enum class ReferenceFamily { StoriesFloat, StoriesQuant, SynthK, SynthQwen2, SynthGemma3 };

// A reference model and its bounds on the CPU backend and on vulkan0 (docs/ENGINE.md "Matching
// llama.cpp's logits" and docs/VULKAN.md "Agreement with llama.cpp" have the numbers).
struct ReferenceModel {
    const char* stem;
    ReferenceFamily family;
    Tolerance cpu;
    Tolerance vulkan_exact;  // vulkan0 running the _exact shader variants (lavapipe by default)
    Tolerance vulkan;        // vulkan0 running the plain variants (GPUs by default)
};

// Why the bounds are what they are:
// - CPU: llama.cpp built on this AVX2 machine (scripts/peer/) misses the reference (made on an
//   AVX-512 machine, where llama.cpp sums F32/F16/BF16 in 16 lanes, takes llamafile's sgemm for
//   prompts and repacks Q4_0/Q4_K/IQ4_NL with its own order) by the same amounts as we do.
//   Where it reproduces the reference (stories260K Q5_0, Q8_0), so do we: kQuantAccepted.
// - vulkan0, _exact variants (docs/VULKAN.md "Bit-exact ops"): every op but silu gives the CPU's
//   AVX2 bits, and on this AVX2 machine every model measured the CPU's numbers except
//   stories260K F32 (below). measured() of lavapipe's numbers (session 6); stories260K Q5_0 and
//   Q8_0 reproduce llama.cpp as the CPU does (0 and 0.0074).
// - vulkan0, plain variants: every op agrees with the CPU's on the same inputs
//   (test_device_mirror.cpp), but sums in another order and its exp()/sin() may differ by a few
//   ulps. Quantized models turn such differences into whole Q8 activation levels; stories260K's
//   quantized files amplify them most: the CPU itself, given 1e-7 relative noise on every op
//   output, moves 0.05 and at 1e-5 0.16, and vulkan0 is 0.38-0.42 from llama.cpp on all five.
//   measured() of vulkan0's numbers (session 4); the four synth-gemma3 rows were not measured
//   that way (time) and carry the CPU's bounds.
inline constexpr ReferenceModel kReferenceModels[] = {
    // vulkan0 _exact measured 0.0118 / 0.00186 here, the CPU 0.0313 / 0.0021: most likely silu's
    // last bits (lavapipe's exp, the one op the exact variants do not reproduce), which another
    // host's lavapipe may round otherwise. This case runs in every test run: the larger of the two.
    {"stories260K", ReferenceFamily::StoriesFloat, measured(0.0313, 0.0021), measured(0.0313, 0.0021), measured(0.0322, 0.00317)},
    {"stories260K-f16", ReferenceFamily::StoriesFloat, measured(0.0281, 0.0079), measured(0.0281, 0.00785), measured(0.0299, 0.0111)},
    {"stories260K-bf16", ReferenceFamily::StoriesFloat, measured(0.0769, 0.0229), measured(0.0769, 0.0228), measured(0.0825, 0.0441)},
    {"stories260K-q5_0", ReferenceFamily::StoriesQuant, kQuantAccepted, kQuantAccepted, measured(0.377, 0.185)},
    {"stories260K-q8_0", ReferenceFamily::StoriesQuant, kQuantAccepted, kQuantAccepted, measured(0.397, 0.194)},
    // Q4_0 on the CPU is repacked into 8-row groups (backends/cpu/repack.h), summed per row in
    // another order than the plain vec_dot's; the mean moved from 0.044 back to the 0.079 it had
    // before the vec_dot's order was matched to ggml's, the max stayed.
    {"stories260K-q4_0", ReferenceFamily::StoriesQuant, measured(0.298, 0.0795), measured(0.298, 0.0795), measured(0.391, 0.194)},
    {"stories260K-q4_1", ReferenceFamily::StoriesQuant, measured(0.202, 0.0036), measured(0.202, 0.0036), measured(0.419, 0.194)},
    {"stories260K-q5_1", ReferenceFamily::StoriesQuant, measured(0.274, 0.067), measured(0.274, 0.0669), measured(0.377, 0.194)},
    {"synth-k", ReferenceFamily::SynthK, measured(0.0073, 0.0035), measured(0.00723, 0.00344), measured(0.00758, 0.00370)},
    {"synth-k-q2_k", ReferenceFamily::SynthK, measured(0.414, 0.169), measured(0.414, 0.168), measured(0.303, 0.127)},
    {"synth-k-q3_k_m", ReferenceFamily::SynthK, measured(0.400, 0.148), measured(0.399, 0.132), measured(0.323, 0.107)},
    {"synth-k-q4_k_s", ReferenceFamily::SynthK, measured(0.339, 0.154), measured(0.297, 0.071), measured(0.356, 0.139)},
    {"synth-k-q4_k_m", ReferenceFamily::SynthK, measured(0.371, 0.157), measured(0.246, 0.0935), measured(0.300, 0.169)},
    {"synth-k-q5_k_m", ReferenceFamily::SynthK, measured(0.293, 0.077), measured(0.292, 0.0648), measured(0.331, 0.131)},
    // The AVX2 Q6_K kernels keep each lane's (level - 32) products instead of one lane holding the
    // whole -32 offset (which passed 2^24 and lost integer units in the float conversion): the
    // result is more exact, and this model's amplified rounding moved from (0.280, 0.097).
    {"synth-k-q6_k", ReferenceFamily::SynthK, measured(0.331, 0.137), measured(0.331, 0.137), measured(0.340, 0.0995)},
    {"synth-k-q8_0", ReferenceFamily::SynthK, measured(0.166, 0.0115), measured(0.166, 0.0114), measured(0.248, 0.0954)},
    {"synth-k-iq4_nl", ReferenceFamily::SynthK, measured(0.218, 0.077), measured(0.218, 0.0769), measured(0.254, 0.136)},
    {"synth-k-iq4_xs", ReferenceFamily::SynthK, measured(0.371, 0.238), measured(0.371, 0.237), measured(0.285, 0.0913)},
    {"synth-qwen2", ReferenceFamily::SynthQwen2, measured(0.0164, 0.0074), measured(0.0164, 0.0074), measured(0.0197, 0.00755)},
    {"synth-qwen2-q8_0", ReferenceFamily::SynthQwen2, measured(0.313, 0.077), measured(0.312, 0.0768), measured(0.780, 0.237)},
    {"synth-qwen2-q4_k_m", ReferenceFamily::SynthQwen2, measured(0.949, 0.337), measured(0.731, 0.150), measured(0.665, 0.322)},
    {"synth-qwen2-q6_k", ReferenceFamily::SynthQwen2, measured(1.122, 0.311), measured(0.730, 0.281), measured(0.901, 0.323)},
    {"synth-gemma3", ReferenceFamily::SynthGemma3, measured(0.0129, 0.0077), measured(0.0128, 0.00769), measured(0.0129, 0.0077)},
    {"synth-gemma3-q8_0", ReferenceFamily::SynthGemma3, measured(0.207, 0.039), measured(0.207, 0.0385), measured(0.207, 0.039)},
    {"synth-gemma3-q4_k_m", ReferenceFamily::SynthGemma3, measured(0.416, 0.277), measured(0.420, 0.251), measured(0.416, 0.277)},
    {"synth-gemma3-q6_k", ReferenceFamily::SynthGemma3, measured(0.478, 0.256), measured(0.449, 0.257), measured(0.478, 0.256)},
};

// Loads ../shared/models/<stem>.gguf on `devices` and CHECKs its deviation from the reference
// against `tol` (max, mean of row maxima, and argmax where the reference's top-2 gap exceeds
// tol.max_abs).
void check_reference(const std::string& stem, const std::vector<std::string>& devices, Tolerance tol,
                     const engine::EngineOptions& options = {});

// Devices (with a --split) that one model runs on, for the greedy-equality checks.
struct Placement {
    std::vector<std::string> devices;
    std::string ratios;
};

// Greedy tokens of the first `n_cases` reference prompts of `stem` on every placement equal
// the CPU's (on failure: where they part, and the CPU's top-2 gap there).
void check_like_cpu(const std::string& stem, std::span<const Placement> placements, size_t n_cases = SIZE_MAX);

}  // namespace deskside::test
