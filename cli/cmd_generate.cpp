// deskside generate -m MODEL -p TEXT: one-shot completion for scripts. Only the completion goes
// to stdout (streamed), timings to stderr; --json prints one object instead.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "engine/generation.h"
#include "engine/model.h"
#include "models/model.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::cli {
namespace {

int run(Args& args) {
    const auto model_path = model_arg(args);
    const auto prompt = args.value("--prompt", "-p");
    const long long n_predict = args.int_value("--n-predict", "-n").value_or(128);
    engine::GenerateParams gp;
    gp.sampling = read_sampling_flags(args);
    const engine::SamplerParams& sp = gp.sampling;
    gp.stop = args.values("--stop");
    const long long threads = args.int_value("--threads", "-t").value_or(0);
    const auto ctx = args.int_value("--ctx-size", "-c");
    const auto cache_k = args.value("--cache-type-k");
    const auto cache_v = args.value("--cache-type-v");
    const bool json = args.flag("--json");
    const DeviceFlags devices = read_device_flags(args);
    args.finish();
    if (!model_path) throw UsageError("-m MODEL is required");
    if (!prompt) throw UsageError("-p TEXT is required");
    if (n_predict < 0) throw UsageError("-n must be >= 0");
    gp.max_tokens = static_cast<int32_t>(n_predict);

    models::ModelFile file = models::open_model_file(*model_path);
    const std::vector<int32_t> prompt_tokens = file.tokenizer->encode(*prompt, true, false);
    if (prompt_tokens.empty()) throw UsageError("the prompt encodes to no tokens");

    engine::EngineOptions opt;
    try {
        if (cache_k) opt.cache.type_k = engine::parse_cache_type(*cache_k);
        if (cache_v) opt.cache.type_v = engine::parse_cache_type(*cache_v);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    opt.cache.n_positions = ctx ? *ctx : static_cast<int64_t>(prompt_tokens.size()) + n_predict;
    if (opt.cache.n_positions < static_cast<int64_t>(prompt_tokens.size()) + n_predict)
        throw UsageError("--ctx-size " + std::to_string(opt.cache.n_positions) + " is smaller than the prompt (" +
                         std::to_string(prompt_tokens.size()) + " tokens) plus -n");
    engine::LoadedModel opened = load_on_devices(std::move(file), devices, opt, 1, static_cast<int>(threads));
    engine::Model& model = *opened.model;
    const models::Tokenizer* tokenizer = opened.tokenizer.get();

    const auto print = [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
    };
    const engine::GenerateResult r =
        engine::generate(model, *tokenizer, prompt_tokens, gp, json ? std::function<void(std::string_view)>{} : print);

    const double prompt_tps = r.prompt_seconds > 0 ? prompt_tokens.size() / r.prompt_seconds : 0;
    const double gen_tps = r.generation_seconds > 0 ? r.tokens.size() / r.generation_seconds : 0;
    if (json) {
        nlohmann::ordered_json j;
        j["prompt_tokens"] = prompt_tokens;
        j["tokens"] = r.tokens;
        j["text"] = r.text;
        j["finish_reason"] = r.finish_reason;
        j["timings"] = {{"prompt_n", prompt_tokens.size()},
                        {"prompt_seconds", r.prompt_seconds},
                        {"prompt_per_second", prompt_tps},
                        {"predicted_n", r.tokens.size()},
                        {"predicted_seconds", r.generation_seconds},
                        {"predicted_per_second", gen_tps},
                        {"threads", opened.cpu_threads()},
                        {"seed", sp.seed}};
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    }
    std::fprintf(stderr, "prompt: %zu tokens, %.1f tokens/s; generation: %zu tokens, %.1f tokens/s (%d threads)\n",
                 prompt_tokens.size(), prompt_tps, r.tokens.size(), gen_tps, opened.cpu_threads());
    return 0;
}

}  // namespace

const Command kGenerateCommand{
    "generate",
    "one-shot completion of a prompt, for scripts",
    "usage: deskside generate -m MODEL -p TEXT [-n N] [options]\n"
    "\n"
    "Prints only the completion on stdout, and a timing line on stderr.\n"
    "  -n, --n-predict N        tokens to generate (default 128)\n"
    "  --temp T                 temperature; 0 = greedy (default 0.8)\n"
    "  --top-k K, --top-p P, --min-p P   (defaults 40, 0.95, 0.05)\n"
    "  --repeat-penalty R, --presence-penalty P, --frequency-penalty F   (over the last 64 tokens)\n"
    "  --seed S                 same seed, same tokens (default: random)\n"
    "  --stop TEXT              stop before TEXT (repeatable)\n"
    "  -t, --threads N          CPU threads (default: physical cores)\n"
    "  -c, --ctx-size N         KV cache positions (default: prompt + N)\n"
    "  --cache-type-k T, --cache-type-v T   f16 (default), q8_0 or f32\n"
    DESKSIDE_DEVICE_FLAGS_HELP
    "  --json                   print {\"prompt_tokens\", \"tokens\", \"text\", \"finish_reason\", \"timings\"}\n",
    run,
};

}  // namespace deskside::cli
