#include "models/store/resolve.h"

#include <filesystem>
#include <stdexcept>

#include "models/store/store.h"

namespace deskside::models::store {

std::string resolve_model(const std::string& name_or_path) { return resolve_model(name_or_path, Store(default_store_dir())); }

std::string resolve_model(const std::string& name_or_path, const Store& store) {
    std::error_code ec;
    if (std::filesystem::exists(name_or_path, ec)) return name_or_path;
    bool valid_name = true;
    try {
        validate_name(name_or_path);
    } catch (const std::invalid_argument&) {
        valid_name = false;
    }
    if (valid_name) {
        if (auto m = store.find(name_or_path)) return store.model_path(*m);
    }
    std::string held;
    for (const Manifest& m : store.list()) held += (held.empty() ? "" : ", ") + m.name;
    throw std::runtime_error("model '" + name_or_path + "' is neither an existing path nor a name in the store " + store.dir() +
                             (held.empty() ? " (the store is empty; add one with `deskside pull SOURCE`)"
                                           : " (the store holds: " + held + ")"));
}

}  // namespace deskside::models::store
