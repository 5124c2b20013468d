#include "cli/model_flags.h"

#include <algorithm>
#include <random>
#include <stdexcept>

#include "models/model.h"
#include "models/store/resolve.h"

namespace deskside::cli {

std::optional<std::string> model_arg(Args& args) {
    auto model = args.value("--model", "-m");
    if (model) model = models::store::resolve_model(*model);
    return model;
}

ModelFlags read_model_flags(Args& args) {
    ModelFlags f;
    const auto model = model_arg(args);
    f.threads = args.int_value("--threads", "-t").value_or(0);
    f.ctx_size = args.int_value("--ctx-size", "-c");
    const auto cache_k = args.value("--cache-type-k");
    const auto cache_v = args.value("--cache-type-v");
    if (!model) throw UsageError("-m MODEL is required");
    f.model_path = *model;
    if (f.threads < 0) throw UsageError("--threads must be >= 0");
    if (f.ctx_size && *f.ctx_size <= 0) throw UsageError("--ctx-size must be > 0");
    try {
        if (cache_k) f.cache.type_k = engine::parse_cache_type(*cache_k);
        if (cache_v) f.cache.type_v = engine::parse_cache_type(*cache_v);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    return f;
}

engine::SamplerParams read_sampling_flags(Args& args) {
    engine::SamplerParams sp;
    sp.temperature = static_cast<float>(args.float_value("--temp").value_or(sp.temperature));
    sp.top_k = static_cast<int32_t>(args.int_value("--top-k").value_or(sp.top_k));
    sp.top_p = static_cast<float>(args.float_value("--top-p").value_or(sp.top_p));
    sp.min_p = static_cast<float>(args.float_value("--min-p").value_or(sp.min_p));
    sp.repeat_penalty = static_cast<float>(args.float_value("--repeat-penalty").value_or(sp.repeat_penalty));
    sp.presence_penalty = static_cast<float>(args.float_value("--presence-penalty").value_or(sp.presence_penalty));
    sp.frequency_penalty = static_cast<float>(args.float_value("--frequency-penalty").value_or(sp.frequency_penalty));
    const auto seed = args.int_value("--seed");
    sp.seed = seed ? static_cast<uint64_t>(*seed) : std::random_device{}();
    return sp;
}

LoadedModel load_model_from_flags(const ModelFlags& flags, int64_t default_positions) {
    LoadedModel m;
    m.tokenizer = models::Tokenizer::load(flags.model_path);
    engine::EngineOptions opt;
    opt.cache = flags.cache;
    models::ModelInfo info = models::load_model(flags.model_path);
    const int64_t n_train = info.hparams.n_ctx_train;
    opt.cache.n_positions = flags.ctx_size ? *flags.ctx_size
                            : n_train > 0  ? std::min(default_positions, n_train)
                                           : default_positions;
    m.backend = std::make_unique<backends::cpu::CpuBackend>(static_cast<int>(flags.threads));
    m.n_positions = opt.cache.n_positions;
    m.model = std::make_unique<engine::Model>(std::move(info), *m.backend, opt);
    return m;
}

}  // namespace deskside::cli
