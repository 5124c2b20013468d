// Running a model on devices opened by name (as `--devices` opens them, split by the placement
// plan) and checking it against llama.cpp's reference runs (reference_cases.h): teacher-forced
// logits at every position and greedy generation. Shared by the CPU and Vulkan reference tests
// and the split tests, so every device is held to the same checks.
#pragma once

#include <cstdint>
#include <memory>
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

// Loads ../shared/models/<stem>.gguf on `devices` and CHECKs its deviation from the reference
// against `tol` (max, mean of row maxima, and argmax where the reference's top-2 gap exceeds
// tol.max_abs).
void check_reference(const std::string& stem, const std::vector<std::string>& devices, Tolerance tol,
                     const engine::EngineOptions& options = {});

}  // namespace deskside::test
