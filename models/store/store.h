// The model store: a directory of pulled models, one entry per name, so commands can take
// `-m NAME` instead of a path.
//
//   $DESKSIDE_MODELS (default ~/.cache/deskside/models)
//     NAME/manifest.json   what the entry is (see Manifest)
//     NAME/FILE            the model: a .gguf file, a checkpoint directory, or a link to either
//     .partial/            downloads in progress, kept after a failure so a re-run resumes them
//     .tmp/                entries being assembled; renamed into place only when complete
//
// An entry appears by one rename of a finished directory, so a failed or interrupted pull never
// leaves a half entry behind; list() only shows directories holding a manifest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deskside::models {
struct ModelInfo;
}

namespace deskside::models::store {

// Tensors of one storage type in a model: how many and how many bytes.
struct QuantEntry {
    std::string type;  // "q4_K", "f32", ... as llama.cpp prints it
    int64_t tensors = 0;
    uint64_t bytes = 0;
};

struct Manifest {
    std::string name;
    std::string source;                 // what was given to `pull`
    std::string file;                   // the model inside the entry directory
    std::optional<std::string> sha256;  // of the model file; none for a checkpoint directory
    uint64_t size = 0;                  // bytes of the model (all files of a directory)
    std::string format;                 // "gguf" or "safetensors"
    std::string architecture;
    std::vector<QuantEntry> quantization;  // most bytes first
    std::string pulled_at;              // ISO 8601, UTC
    bool linked = false;                // `file` is a symbolic link to the original

    // The dominant storage type ("q4_K"), or "" for a model without tensors.
    std::string main_quant() const;
};

// The tensors of `info` grouped by storage type, most bytes first (Manifest::quantization).
std::vector<QuantEntry> quantization_mix(const ModelInfo& info);

nlohmann::json manifest_to_json(const Manifest& m);
// Throws std::runtime_error naming `where` (the manifest's path) and the bad field.
Manifest manifest_from_json(const nlohmann::json& j, const std::string& where);

// Store names: letters, digits, '.', '_', '-'; not starting with '.'; at most 128 characters.
// Throws std::invalid_argument explaining the rule.
void validate_name(const std::string& name);

// $DESKSIDE_MODELS, else ~/.cache/deskside/models.
std::string default_store_dir();

class Store {
   public:
    explicit Store(std::string dir);

    const std::string& dir() const { return dir_; }
    // Every complete entry, sorted by name. Entries whose manifest does not parse are skipped
    // with a warning on stderr, so one broken entry does not hide the others.
    std::vector<Manifest> list() const;
    std::optional<Manifest> find(const std::string& name) const;
    // Absolute path of an entry's model (file or directory).
    std::string model_path(const Manifest& m) const;
    // Deletes an entry (not what a linked entry points to). Throws if the name is unknown.
    void remove(const std::string& name);

    // Where a download of `url` for entry `name` keeps its bytes until complete.
    std::string partial_path(const std::string& name, const std::string& url) const;
    // A fresh, empty directory under .tmp/ for assembling an entry; the caller removes it.
    std::string make_staging_dir(const std::string& name) const;

    // Bytes the store may still grow by under $DESKSIDE_STORE_MAX_BYTES; nullopt when unset.
    std::optional<uint64_t> room_left() const;
    // Throws when `incoming` bytes would not fit under $DESKSIDE_STORE_MAX_BYTES.
    void check_room(uint64_t incoming, const std::string& what) const;

    // Turns a staging directory holding the model as `file` into entry `name`: reads the model
    // (so a file that is not a model never enters the store), writes the manifest and renames
    // the directory into place. With `force` an existing entry is replaced; without, it is an
    // error. `sha256` is the model file's digest when the caller already knows it.
    Manifest commit(const std::string& staging_dir, const std::string& name, const std::string& file,
                    const std::string& source, std::optional<std::string> sha256, bool force, bool linked);

   private:
    std::string dir_;
};

}  // namespace deskside::models::store
