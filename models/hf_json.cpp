#include "models/hf_json.h"

#include <cmath>
#include <fstream>
#include <sstream>

namespace deskside::models {

nlohmann::json read_json_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw HfCheckpointError(path + ": cannot open");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw HfCheckpointError(path + ": read error");
    try {
        return nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::parse_error& e) {
        const size_t at = e.byte > 0 ? e.byte - 1 : 0;
        throw HfCheckpointError(path + ": invalid JSON at byte offset " + std::to_string(at) + ": " + e.what());
    }
}

JsonFields::JsonFields(const nlohmann::json& obj, std::string file, std::string prefix)
    : obj_(&obj), file_(std::move(file)), prefix_(std::move(prefix)) {
    if (!obj.is_object()) {
        const std::string what = prefix_.empty() ? "the file" : "field '" + prefix_ + "'";
        throw HfCheckpointError(file_ + ": " + what + " must be a JSON object, found " + obj.type_name());
    }
}

const nlohmann::json* JsonFields::get(std::string_view key) const {
    auto it = obj_->find(std::string(key));
    if (it == obj_->end() || it->is_null()) return nullptr;
    return &*it;
}

std::string JsonFields::where(std::string_view key) const {
    return file_ + ": field '" + (prefix_.empty() ? "" : prefix_ + ".") + std::string(key) + "'";
}

void JsonFields::fail(std::string_view key, const std::string& what) const { throw HfCheckpointError(where(key) + ": " + what); }

std::optional<int64_t> JsonFields::opt_int(std::string_view key) const {
    const nlohmann::json* v = get(key);
    if (!v) return std::nullopt;
    if (v->is_number_integer()) {
        if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) fail(key, "integer too large");
        return v->get<int64_t>();
    }
    // Python writes 8.0 for some integral values; accept those, nothing fractional.
    if (v->is_number_float()) {
        const double d = v->get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
    }
    fail(key, "expected an integer, found " + v->dump());
}

std::optional<double> JsonFields::opt_float(std::string_view key) const {
    const nlohmann::json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(key, "expected a number, found " + v->dump());
    return v->get<double>();
}

std::optional<bool> JsonFields::opt_bool(std::string_view key) const {
    const nlohmann::json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(key, "expected true or false, found " + v->dump());
    return v->get<bool>();
}

std::optional<std::string> JsonFields::opt_string(std::string_view key) const {
    const nlohmann::json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(key, "expected a string, found " + std::string(v->type_name()));
    return v->get<std::string>();
}

std::optional<JsonFields> JsonFields::opt_object(std::string_view key) const {
    const nlohmann::json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_object()) fail(key, "expected an object, found " + std::string(v->type_name()));
    return JsonFields(*v, file_, (prefix_.empty() ? "" : prefix_ + ".") + std::string(key));
}

}  // namespace deskside::models
