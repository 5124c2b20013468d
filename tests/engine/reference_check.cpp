#include "reference_check.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <map>
#include <span>

#include "backends/devices.h"
#include "backends/op_harness.h"
#include "engine/placement.h"

namespace deskside::test {

std::vector<engine::DeviceLayers> split_layers(const models::ModelInfo& info, const std::string& ratios,
                                               const std::vector<backends::Backend*>& backends) {
    const engine::MemoryNeeds needs = engine::memory_needs(info, engine::KvCacheConfig{}, 512);
    std::vector<engine::PlanDevice> devices;
    for (size_t i = 0; i < backends.size(); ++i) devices.push_back({"dev" + std::to_string(i), uint64_t{1} << 40});
    const engine::Plan plan =
        engine::plan_placement(needs, devices, ratios.empty() ? engine::SplitSpec{} : engine::parse_split(ratios));
    std::vector<engine::DeviceLayers> out;
    for (size_t i = 0; i < backends.size(); ++i)
        out.push_back({backends[i], plan.devices[i].layer_begin, plan.devices[i].layer_end});
    return out;
}

backends::Backend& shared_device(const std::string& name) {
    static std::map<std::string, std::unique_ptr<backends::Backend>> opened;
    const char* split = std::getenv("DESKSIDE_VULKAN_SPLIT");
    std::unique_ptr<backends::Backend>& device = opened[name + "/" + (split ? split : "")];
    if (!device) device = backends::open_device(name, kCpuThreads);
    return *device;
}

DeviceModel open_model(const std::string& model_path, const std::vector<std::string>& devices, const std::string& ratios,
                       const engine::EngineOptions& options) {
    DeviceModel m;
    std::vector<backends::Backend*> raw;
    for (const std::string& name : devices) raw.push_back(&shared_device(name));
    models::ModelInfo info = models::load_model(model_path);
    std::vector<engine::DeviceLayers> layers = split_layers(info, ratios, raw);
    m.model = std::make_unique<engine::Model>(std::move(info), std::move(layers), options);
    return m;
}

bool device_or_skip(const std::string& name, const std::string& what) {
    std::vector<backends::AbsentApi> absent;
    const std::vector<backends::DeviceInfo> devices = backends::list_devices(&absent);
    for (const backends::DeviceInfo& d : devices)
        if (d.name == name && d.usable) return true;
    fail_for_absent_required(devices, absent, name);  // DESKSIDE_REQUIRE_DEVICES turns the skip into a failure
    WARN("no usable " << name << " device in this build or on this machine: " << what << " skipped");
    return false;
}

int32_t argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

double top_gap(const float* row, int64_t n) {
    float a = -INFINITY, b = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        if (row[i] > a) {
            b = a;
            a = row[i];
        } else if (row[i] > b) {
            b = row[i];
        }
    }
    return a - b;
}

std::vector<int32_t> greedy(engine::Model& model, int32_t seq, const std::vector<int32_t>& prompt, size_t n) {
    std::vector<engine::BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i)
        batch.push_back({seq, prompt[i], static_cast<int32_t>(i), i + 1 == prompt.size()});
    std::span<const float> logits = model.decode(batch);
    std::vector<int32_t> out;
    while (out.size() < n) {
        out.push_back(argmax(logits.data(), model.n_vocab()));
        const engine::BatchToken t{seq, out.back(), static_cast<int32_t>(model.length(seq)), true};
        logits = model.decode(std::span(&t, 1));
    }
    return out;
}

Deviation teacher_forced(engine::Model& model, const ReferenceRun& ref, double gap) {
    REQUIRE(model.n_vocab() == ref.n_vocab);
    Deviation d;
    int64_t n_rows = 0;
    for (size_t c = 0; c < ref.cases.size(); ++c) {
        const ReferenceCase& rc = ref.cases[c];
        std::vector<int32_t> tokens = rc.prompt_tokens;
        tokens.insert(tokens.end(), rc.greedy_tokens.begin(), rc.greedy_tokens.end() - 1);
        REQUIRE(static_cast<int64_t>(tokens.size()) == rc.rows);
        std::vector<engine::BatchToken> batch;
        for (size_t i = 0; i < tokens.size(); ++i)
            batch.push_back({static_cast<int32_t>(c), tokens[i], static_cast<int32_t>(i), true});
        const std::span<const float> logits = model.decode(batch);
        REQUIRE(static_cast<int64_t>(logits.size()) == rc.rows * ref.n_vocab);
        for (int64_t r = 0; r < rc.rows; ++r) {
            const float* ours = logits.data() + r * ref.n_vocab;
            const float* theirs = rc.logits.data() + r * ref.n_vocab;
            double row_max = 0;
            for (int64_t i = 0; i < ref.n_vocab; ++i) row_max = std::max<double>(row_max, std::fabs(ours[i] - theirs[i]));
            d.max_abs = std::max(d.max_abs, row_max);
            d.mean_row_max += row_max;
            ++n_rows;
            if (top_gap(theirs, ref.n_vocab) > gap && argmax(ours, ref.n_vocab) != argmax(theirs, ref.n_vocab))
                ++d.argmax_mismatches;
        }
        model.truncate(static_cast<int32_t>(c), 0);
    }
    d.mean_row_max /= static_cast<double>(n_rows);
    return d;
}

void check_reference(const std::string& stem, const std::vector<std::string>& devices, Tolerance tol,
                     const engine::EngineOptions& options) {
    const ReferenceRun ref = load_reference(stem);
    DeviceModel m = open_model(shared_path("models/" + stem + ".gguf"), devices, "", options);
    const Deviation d = teacher_forced(*m.model, ref, tol.max_abs);
    std::string where;
    for (const std::string& name : devices) where += (where.empty() ? "" : ",") + name;
    INFO(stem << " on " << where << ": max |ours - llama.cpp| = " << d.max_abs << " (tolerance " << tol.max_abs
              << "), mean of row maxima " << d.mean_row_max << " (tolerance " << tol.mean_row_max << "), "
              << d.argmax_mismatches << " argmax mismatches where the reference's top-2 gap exceeds " << tol.max_abs);
    CHECK(d.max_abs <= tol.max_abs);
    CHECK(d.mean_row_max <= tol.mean_row_max);
    CHECK(d.argmax_mismatches == 0);
}

namespace {

std::string describe(const Placement& p) {
    std::string out;
    for (const std::string& d : p.devices) out += (out.empty() ? "" : ",") + d;
    return p.ratios.empty() ? out : out + " split " + p.ratios;
}

// A greedy continuation and, per token, the top-1 minus top-2 gap of the logits it was picked from.
struct GreedyRun {
    std::vector<int32_t> tokens;
    std::vector<double> gaps;
};

GreedyRun greedy_run(engine::Model& model, int32_t seq, const std::vector<int32_t>& prompt, size_t n) {
    std::vector<engine::BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({seq, prompt[i], static_cast<int32_t>(i), i + 1 == prompt.size()});
    std::span<const float> logits = model.decode(batch);
    GreedyRun run;
    while (run.tokens.size() < n) {
        run.gaps.push_back(top_gap(logits.data(), model.n_vocab()));
        run.tokens.push_back(argmax(logits.data(), model.n_vocab()));
        const engine::BatchToken next{seq, run.tokens.back(), static_cast<int32_t>(model.length(seq)), true};
        logits = model.decode(std::span(&next, 1));
    }
    return run;
}

// Greedy runs for the first `n_cases` reference prompts of `stem` (as many tokens as the
// reference generated).
std::vector<GreedyRun> greedy_runs(const std::string& stem, const Placement& p, size_t n_cases) {
    const ReferenceRun ref = load_reference(stem);
    DeviceModel m = open_model(shared_path("models/" + stem + ".gguf"), p.devices, p.ratios);
    std::vector<GreedyRun> out;
    for (size_t c = 0; c < std::min(n_cases, ref.cases.size()); ++c)
        out.push_back(greedy_run(*m.model, static_cast<int32_t>(c), ref.cases[c].prompt_tokens, ref.cases[c].greedy_tokens.size()));
    return out;
}

}  // namespace

void check_like_cpu(const std::string& stem, std::span<const Placement> placements, size_t n_cases) {
    const std::vector<GreedyRun> cpu = greedy_runs(stem, {{"cpu"}, ""}, n_cases);
    for (const Placement& p : placements) {
        const std::vector<GreedyRun> vk = greedy_runs(stem, p, n_cases);
        REQUIRE(vk.size() == cpu.size());
        for (size_t c = 0; c < cpu.size(); ++c) {
            const auto& a = cpu[c].tokens;
            const size_t at = std::mismatch(a.begin(), a.end(), vk[c].tokens.begin()).first - a.begin();
            INFO(stem << " on " << describe(p) << ", prompt " << c << ": first difference at token " << at << " of "
                      << a.size() << (at < a.size() ? ", where the CPU's top-2 gap is " + std::to_string(cpu[c].gaps[at]) : ""));
            CHECK(at == a.size());
        }
    }
}

}  // namespace deskside::test
