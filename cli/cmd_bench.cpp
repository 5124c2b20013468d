// deskside bench -m MODEL: prompt-processing and generation throughput, measured the way
// llama.cpp's llama-bench measures them so the two can be compared on the same model file.
//
//   ppP: one decode() of a batch of P tokens into an empty cache (logits of the last only);
//   tgN: N decode() calls of one token each, starting from an empty cache.
// Tokens are drawn from a fixed-seed generator over the vocabulary, as llama-bench draws them;
// nothing is sampled. Each test runs once untimed (warm-up: page in the weights, size the
// scratch) and then `-r` timed repetitions; the result is the mean and sample standard deviation
// of the repetitions' tokens/s.
//
// Batched mode (-npl / --parallel, with -npp and -ntg), measured the way llama.cpp's
// llama-batched-bench measures it, to compare the engine without a server in between: for each
// (pp, tg, pl), pl sequences of pp prompt tokens go into the cache as one batch (position by
// position, logits of each sequence's last token), then tg lockstep steps of pl tokens, one per
// sequence, each wanting logits. It prints the prompt and decode times and aggregate tokens/s.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "engine/model.h"
#include "engine/placement.h"
#include "models/model.h"
#include "quant/types.h"

namespace deskside::cli {
namespace {

// llama-bench's default micro-batch: a pp512 is computed as one step of 512 tokens.
constexpr int64_t kMaxBatch = 512;
constexpr uint32_t kTokenSeed = 42;

struct TestResult {
    std::string name;  // "pp512", "tg128"
    long long n_prompt = 0, n_gen = 0;
    std::vector<double> seconds;  // one per timed repetition
};

double tokens_per_second(const TestResult& t, double seconds) {
    return static_cast<double>(t.n_prompt + t.n_gen) / seconds;
}

// Mean and sample standard deviation (n - 1; 0 for a single sample), as llama-bench reports.
std::pair<double, double> mean_sd(const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    const double mean = sum / static_cast<double>(v.size());
    if (v.size() < 2) return {mean, 0.0};
    double sq = 0;
    for (double x : v) sq += (x - mean) * (x - mean);
    return {mean, std::sqrt(sq / static_cast<double>(v.size() - 1))};
}

std::vector<double> samples_ts(const TestResult& t) {
    std::vector<double> out;
    for (double s : t.seconds) out.push_back(tokens_per_second(t, s));
    return out;
}

// The weight type holding most of the bytes of the 2-D tensors ("Q4_0" for a Q4_0 file whose
// norms are F32 and whose output matrix is Q6_K), the label llama-bench prints as the model type.
std::string dominant_type(const models::ModelInfo& info) {
    std::map<quant::TypeId, uint64_t> bytes;
    for (const models::Tensor& t : info.tensors) {
        if (t.shape.size() >= 2) bytes[t.type] += t.n_bytes;
    }
    if (bytes.empty()) return "?";
    const auto it = std::max_element(bytes.begin(), bytes.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
    std::string name(quant::type_info(it->first).name);
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return name;
}

uint64_t weight_bytes(const models::ModelInfo& info) {
    uint64_t total = 0;
    for (const models::Tensor& t : info.tensors) total += t.n_bytes;
    return total;
}

double run_pp(engine::Model& model, std::mt19937& rng, long long n) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model.n_vocab() - 1));
    std::vector<engine::BatchToken> batch(static_cast<size_t>(n));
    for (long long i = 0; i < n; ++i) batch[i] = {0, pick(rng), static_cast<int32_t>(i), i == n - 1};
    model.truncate(0, 0);
    const auto t0 = std::chrono::steady_clock::now();
    model.decode(batch);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double run_tg(engine::Model& model, std::mt19937& rng, long long n) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model.n_vocab() - 1));
    model.truncate(0, 0);
    const auto t0 = std::chrono::steady_clock::now();
    for (long long i = 0; i < n; ++i) {
        const engine::BatchToken t{0, pick(rng), static_cast<int32_t>(i), true};
        model.decode(std::span(&t, 1));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A comma-separated list of integers in [1, 2^20] ("128,256") given to `flag`; {fallback} when
// absent. Throws UsageError naming the flag and the bad item.
std::vector<long long> int_list(const std::optional<std::string>& text, const std::string& flag, long long fallback) {
    if (!text) return {fallback};
    std::vector<long long> out;
    for (const std::string& item : engine::comma_items(*text)) {
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size() || v < 1 || v > (1 << 20))
            throw UsageError(flag + ": '" + item + "' is not an integer in [1, 1048576]");
        out.push_back(v);
    }
    return out;
}

struct BatchedResult {
    long long pp = 0, tg = 0, pl = 0;
    double t_pp = 0, t_tg = 0;
};

// One llama-batched-bench measurement: pl sequences (ids 0 .. pl-1) in an emptied cache.
BatchedResult run_batched(engine::Model& model, std::mt19937& rng, long long pp, long long tg, long long pl) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model.n_vocab() - 1));
    for (long long j = 0; j < pl; ++j) model.truncate(static_cast<int32_t>(j), 0);
    std::vector<engine::BatchToken> batch;
    for (long long i = 0; i < pp; ++i)
        for (long long j = 0; j < pl; ++j)
            batch.push_back({static_cast<int32_t>(j), pick(rng), static_cast<int32_t>(i), i == pp - 1});
    BatchedResult r{pp, tg, pl, 0, 0};
    const auto t0 = std::chrono::steady_clock::now();
    model.decode(batch);
    const auto t1 = std::chrono::steady_clock::now();
    for (long long i = 0; i < tg; ++i) {
        batch.clear();
        for (long long j = 0; j < pl; ++j) batch.push_back({static_cast<int32_t>(j), pick(rng), static_cast<int32_t>(pp + i), true});
        model.decode(batch);
    }
    const auto t2 = std::chrono::steady_clock::now();
    r.t_pp = std::chrono::duration<double>(t1 - t0).count();
    r.t_tg = std::chrono::duration<double>(t2 - t1).count();
    return r;
}

int run_batched_bench(const std::string& model_path, const DeviceFlags& devices, int threads, bool json,
                      const std::vector<long long>& pps, const std::vector<long long>& tgs,
                      const std::vector<long long>& pls) {
    models::ModelFile file = models::open_model_file(model_path);
    engine::EngineOptions opt;
    opt.n_batch = kMaxBatch;  // llama-batched-bench's default micro-batch
    long long max_pl = 1, n_positions = 1;
    for (long long pp : pps)
        for (long long tg : tgs)
            for (long long pl : pls) {
                max_pl = std::max(max_pl, pl);
                // Each sequence rounds up to whole blocks.
                n_positions = std::max(n_positions, pl * (pp + tg + opt.cache.block_size));
            }
    opt.cache.n_positions = n_positions;
    engine::LoadedModel opened = load_on_devices(std::move(file), devices, opt, max_pl, threads);
    engine::Model& model = *opened.model;

    std::mt19937 rng(kTokenSeed);
    run_batched(model, rng, std::min<long long>(pps.front(), 16), 1, 1);  // warm-up: page in the weights
    std::vector<BatchedResult> results;
    for (long long pp : pps)
        for (long long tg : tgs)
            for (long long pl : pls) {
                results.push_back(run_batched(model, rng, pp, tg, pl));
                const BatchedResult& r = results.back();
                std::fprintf(stderr, "bench: run %zu/%zu: pp %lld, tg %lld, pl %lld: %.3f s\n", results.size(),
                             pps.size() * tgs.size() * pls.size(), pp, tg, pl, r.t_pp + r.t_tg);
            }
    for (long long j = 0; j < max_pl; ++j) model.truncate(static_cast<int32_t>(j), 0);

    const auto speed = [](double tokens, double s) { return s > 0 ? tokens / s : 0.0; };
    if (json) {
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (const BatchedResult& r : results) {
            out.push_back({{"n_batch", opt.n_batch},
                           {"n_threads", opened.cpu_threads()},
                           {"pp", r.pp},
                           {"tg", r.tg},
                           {"pl", r.pl},
                           {"n_kv", r.pl * (r.pp + r.tg)},
                           {"t_pp", r.t_pp},
                           {"speed_pp", speed(static_cast<double>(r.pl * r.pp), r.t_pp)},
                           {"t_tg", r.t_tg},
                           {"speed_tg", speed(static_cast<double>(r.pl * r.tg), r.t_tg)},
                           {"t", r.t_pp + r.t_tg},
                           {"speed", speed(static_cast<double>(r.pl * (r.pp + r.tg)), r.t_pp + r.t_tg)}});
        }
        std::printf("%s\n", out.dump(2).c_str());
        return 0;
    }
    std::printf("|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV", "T_PP s",
                "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(7, '-').c_str(), std::string(8, '-').c_str(),
                std::string(6, '-').c_str(), std::string(8, '-').c_str(), std::string(10, '-').c_str(),
                std::string(10, '-').c_str(), std::string(10, '-').c_str(), std::string(10, '-').c_str(),
                std::string(10, '-').c_str(), std::string(10, '-').c_str());
    for (const BatchedResult& r : results) {
        std::printf("|%6lld | %6lld | %4lld | %6lld | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", r.pp, r.tg,
                    r.pl, r.pl * (r.pp + r.tg), r.t_pp, speed(static_cast<double>(r.pl * r.pp), r.t_pp), r.t_tg,
                    speed(static_cast<double>(r.pl * r.tg), r.t_tg), r.t_pp + r.t_tg,
                    speed(static_cast<double>(r.pl * (r.pp + r.tg)), r.t_pp + r.t_tg));
    }
    return 0;
}

int run(Args& args) {
    const auto model_path = model_arg(args);
    const std::optional<long long> p_flag = args.int_value("--n-prompt", "-p");
    const std::optional<long long> n_flag = args.int_value("--n-gen", "-n");
    const std::optional<long long> r_flag = args.int_value("--repetitions", "-r");
    const std::optional<std::string> npl = args.value("--parallel", "-npl");
    const std::optional<std::string> npp = args.value("-npp");
    const std::optional<std::string> ntg = args.value("-ntg");
    const long long threads = args.int_value("--threads", "-t").value_or(0);
    const bool json = args.flag("--json");
    const DeviceFlags devices = read_device_flags(args);
    args.finish();
    if (!model_path) throw UsageError("-m MODEL is required");
    if (threads < 0 || threads > 1024) throw UsageError("--threads must be in [0, 1024] (0: physical cores)");
    if (npl || npp || ntg) {
        if (p_flag || n_flag || r_flag) throw UsageError("-p, -n and -r do not apply to the batched mode (-npp, -ntg, -npl)");
        return run_batched_bench(*model_path, devices, static_cast<int>(threads), json, int_list(npp, "-npp", 128),
                                 int_list(ntg, "-ntg", 128), int_list(npl, "-npl", 1));
    }
    const long long n_prompt = p_flag.value_or(512);
    const long long n_gen = n_flag.value_or(128);
    const long long reps = r_flag.value_or(5);
    if (n_prompt < 0 || n_prompt > (1 << 20)) throw UsageError("-p must be in [0, 1048576]");
    if (n_gen < 0 || n_gen > (1 << 20)) throw UsageError("-n must be in [0, 1048576]");
    if (n_prompt == 0 && n_gen == 0) throw UsageError("-p 0 and -n 0 leave nothing to measure");
    if (reps < 1 || reps > 1000) throw UsageError("-r must be in [1, 1000]");

    models::ModelFile file = models::open_model_file(*model_path);
    const models::ModelInfo& info = file.info;
    const std::string type = dominant_type(info);
    const uint64_t size = weight_bytes(info);
    const int64_t n_params = info.n_params();
    const std::string arch = info.hparams.architecture;

    engine::EngineOptions opt;
    opt.n_batch = std::clamp<int64_t>(n_prompt, 1, kMaxBatch);
    opt.cache.n_positions = std::max<int64_t>(std::max(n_prompt, n_gen), 1);
    engine::LoadedModel opened = load_on_devices(std::move(file), devices, opt, 1, static_cast<int>(threads));
    engine::Model& model = *opened.model;

    std::vector<TestResult> tests;
    if (n_prompt > 0) tests.push_back({"pp" + std::to_string(n_prompt), n_prompt, 0, {}});
    if (n_gen > 0) tests.push_back({"tg" + std::to_string(n_gen), 0, n_gen, {}});
    std::mt19937 rng(kTokenSeed);
    for (TestResult& t : tests) {
        const auto once = [&] { return t.n_prompt > 0 ? run_pp(model, rng, t.n_prompt) : run_tg(model, rng, t.n_gen); };
        once();  // warm-up
        // A line per repetition on stderr: a long run shows it is alive and how fast it goes.
        for (long long r = 0; r < reps; ++r) {
            const double secs = once();
            t.seconds.push_back(secs);
            std::fprintf(stderr, "bench: %s run %lld/%lld: %.2f t/s (%.3f s)\n", t.name.c_str(), r + 1, reps,
                         tokens_per_second(t, secs), secs);
        }
    }
    model.truncate(0, 0);

    if (json) {
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (const TestResult& t : tests) {
            const std::vector<double> ts = samples_ts(t);
            const auto [avg_ts, sd_ts] = mean_sd(ts);
            const auto [avg_s, sd_s] = mean_sd(t.seconds);
            std::vector<long long> ns;
            for (double s : t.seconds) ns.push_back(std::llround(s * 1e9));
            out.push_back({{"model_filename", *model_path},
                           {"model_type", arch + " " + type},
                           {"model_size", size},
                           {"model_n_params", n_params},
                           {"backend", "CPU"},
                           {"n_threads", opened.cpu_threads()},
                           {"n_batch", opt.n_batch},
                           {"test", t.name},
                           {"n_prompt", t.n_prompt},
                           {"n_gen", t.n_gen},
                           {"repetitions", reps},
                           {"avg_ns", std::llround(avg_s * 1e9)},
                           {"stddev_ns", std::llround(sd_s * 1e9)},
                           {"avg_ts", avg_ts},
                           {"stddev_ts", sd_ts},
                           {"samples_ns", ns},
                           {"samples_ts", ts}});
        }
        std::printf("%s\n", out.dump(2).c_str());
        return 0;
    }
    std::printf("| %-24s | %10s | %8s | %7s | %7s | %8s | %20s |\n", "model", "size", "params", "backend", "threads",
                "test", "t/s");
    std::printf("| %s | %s: | %s: | %s | %s: | %s: | %s: |\n", std::string(24, '-').c_str(),
                std::string(9, '-').c_str(), std::string(7, '-').c_str(), std::string(7, '-').c_str(),
                std::string(6, '-').c_str(), std::string(7, '-').c_str(), std::string(19, '-').c_str());
    for (const TestResult& t : tests) {
        const auto [avg_ts, sd_ts] = mean_sd(samples_ts(t));
        char size_text[32], params_text[32], ts_text[48];
        std::snprintf(size_text, sizeof size_text, "%.2f MiB", static_cast<double>(size) / (1024.0 * 1024.0));
        if (n_params >= 1000000000) std::snprintf(params_text, sizeof params_text, "%.2f B", n_params / 1e9);
        else std::snprintf(params_text, sizeof params_text, "%.2f M", n_params / 1e6);
        std::snprintf(ts_text, sizeof ts_text, "%.2f ± %.2f", avg_ts, sd_ts);
        std::printf("| %-24s | %10s | %8s | %7s | %7d | %8s | %21s |\n", (arch + " " + type).c_str(), size_text,
                    params_text, "CPU", opened.cpu_threads(), t.name.c_str(), ts_text);
    }
    return 0;
}

}  // namespace

const Command kBenchCommand{
    "bench",
    "measure prompt and generation throughput (like llama-bench)",
    "usage: deskside bench -m MODEL [-p 512] [-n 128] [-r 5] [-t N] [--json]\n"
    "       deskside bench -m MODEL -npp 128 -ntg 128 -npl 1,8 [-t N] [--json]\n"
    "\n"
    "Runs ppP (one batch of P prompt tokens) and tgN (N single-token steps) on random tokens,\n"
    "each once to warm up and then R times, and prints the mean ± standard deviation of tokens/s.\n"
    "  -p, --n-prompt P         prompt tokens per pp run; 0 skips pp (default 512)\n"
    "  -n, --n-gen N            generated tokens per tg run; 0 skips tg (default 128)\n"
    "  -r, --repetitions R      timed runs per test (default 5)\n"
    "  -t, --threads N          CPU threads (default: physical cores)\n"
    DESKSIDE_DEVICE_FLAGS_HELP
    "  --json                   print an array of results (llama-bench -o json field names)\n"
    "Batched mode, as llama-batched-bench: for each PP, TG, PL of the lists, PL sequences of PP\n"
    "prompt tokens in one batch, then TG steps of PL tokens (one per sequence); once each.\n"
    "  -npl, --parallel PL,...  sequences decoded together (default 1)\n"
    "  -npp PP,...              prompt tokens per sequence (default 128)\n"
    "  -ntg TG,...              generated tokens per sequence (default 128)\n",
    run,
};

}  // namespace deskside::cli
