// Turns a command's `-m MODEL` into a path: an existing file or directory wins, otherwise MODEL
// is a name in the model store ($DESKSIDE_MODELS, see store.h).
#pragma once

#include <string>

namespace deskside::models::store {

class Store;

// Throws std::runtime_error for a name the store does not hold; the message lists what it holds.
std::string resolve_model(const std::string& name_or_path);
std::string resolve_model(const std::string& name_or_path, const Store& store);

}  // namespace deskside::models::store
