// deskside list [--json]: the models in the store, one per line (or the manifests as JSON).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "models/store/progress.h"
#include "models/store/store.h"

namespace deskside::cli {
namespace {

int run(Args& args) {
    const bool json = args.flag("--json");
    args.finish();
    const models::store::Store store(models::store::default_store_dir());
    const auto entries = store.list();
    if (json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& m : entries) {
            auto j = models::store::manifest_to_json(m);
            j["path"] = store.model_path(m);
            out.push_back(std::move(j));
        }
        std::printf("%s\n", out.dump(2).c_str());
        return 0;
    }
    if (entries.empty()) {
        std::fprintf(stderr, "no models in %s (add one with `deskside pull SOURCE`)\n", store.dir().c_str());
        return 0;
    }
    std::printf("%-32s %10s  %-12s %-8s %s\n", "NAME", "SIZE", "ARCH", "QUANT", "SOURCE");
    for (const auto& m : entries) {
        std::printf("%-32s %10s  %-12s %-8s %s\n", m.name.c_str(), models::store::human_bytes(double(m.size)).c_str(),
                    m.architecture.c_str(), m.main_quant().c_str(), m.source.c_str());
    }
    return 0;
}

}  // namespace

const Command kListCommand{
    "list",
    "list the models in the local store",
    "usage: deskside list [--json]\n"
    "\n"
    "Lists the store $DESKSIDE_MODELS (default ~/.cache/deskside/models): name, size, architecture,\n"
    "dominant quantization and source. QUANT is the storage type holding the most bytes.\n"
    "  --json   every manifest (with per-type tensor counts and bytes, sha256, path) as a JSON array\n",
    &run,
};

}  // namespace deskside::cli
