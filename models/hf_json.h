// The JSON files of a Hugging Face checkpoint (config.json, the shard index, tokenizer files):
// reading them with errors that name the file and the byte offset, and typed field access whose
// errors name the file and the JSON path ("text_config.rope_scaling.factor").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace deskside::models {

class HfCheckpointError : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

// Reads and parses a JSON file. Throws HfCheckpointError naming the file (and the byte offset
// of a syntax error).
nlohmann::json read_json_file(const std::string& path);

// One JSON object inside a file. A key holding null counts as absent, as Python's None does in
// a transformers config. Getters throw HfCheckpointError when a value has the wrong type.
class JsonFields {
   public:
    // `obj` must outlive this view. `prefix` is the JSON path of `obj` ("" for the root).
    JsonFields(const nlohmann::json& obj, std::string file, std::string prefix = {});

    const std::string& file() const { return file_; }
    bool has(std::string_view key) const { return get(key) != nullptr; }
    const nlohmann::json* get(std::string_view key) const;  // nullptr when absent or null

    std::optional<int64_t> opt_int(std::string_view key) const;
    std::optional<double> opt_float(std::string_view key) const;
    std::optional<bool> opt_bool(std::string_view key) const;
    std::optional<std::string> opt_string(std::string_view key) const;
    // A nested object; nullopt when absent or null.
    std::optional<JsonFields> opt_object(std::string_view key) const;

    // "FILE: field 'PATH.key'", for messages built by callers.
    std::string where(std::string_view key) const;
    [[noreturn]] void fail(std::string_view key, const std::string& what) const;

   private:
    const nlohmann::json* obj_;
    std::string file_;
    std::string prefix_;
};

}  // namespace deskside::models
