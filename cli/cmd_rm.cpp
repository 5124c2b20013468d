// deskside rm NAME...: delete entries from the store.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "models/store/store.h"

namespace deskside::cli {
namespace {

int run(Args& args) {
    const auto names = args.positionals();
    args.finish();
    if (names.empty()) throw UsageError("give the NAME of at least one stored model");
    models::store::Store store(models::store::default_store_dir());
    for (const std::string& name : names) {
        try {
            models::store::validate_name(name);
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    }
    for (const std::string& name : names) {
        store.remove(name);
        std::fprintf(stderr, "removed %s\n", name.c_str());
    }
    return 0;
}

}  // namespace

const Command kRmCommand{
    "rm",
    "remove models from the local store",
    "usage: deskside rm NAME...\n"
    "\n"
    "Deletes the named entries of the store $DESKSIDE_MODELS. For an entry pulled with --link only\n"
    "the link goes; the original file stays.\n",
    &run,
};

}  // namespace deskside::cli
