#include "server/api_error.h"

#include <random>

namespace deskside::server {

nlohmann::ordered_json ApiError::body() const {
    nlohmann::ordered_json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
    if (!param_.empty()) e["param"] = param_;
    if (!code_.empty()) e["code"] = code_;
    return {{"error", e}};
}

ApiError invalid_param(const std::string& param, const std::string& message) {
    return ApiError(400, message, param, "invalid_value");
}

ApiError wrong_type(const std::string& param, const std::string& expected) {
    return ApiError(400, "'" + param + "' must be " + expected, param, "invalid_type");
}

ApiError unsupported(const std::string& param, const std::string& what) {
    return ApiError(400, what + " ('" + param + "') is not supported by this server", param, "unsupported_parameter");
}

const nlohmann::json& required_field(const nlohmann::json& obj, const char* key, const std::string& path) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null())
        throw ApiError(400, "'" + path + "." + key + "' is required", path + "." + key, "missing_required_parameter");
    return *it;
}

std::string string_field(const nlohmann::json& obj, const char* key, const std::string& path) {
    const nlohmann::json& v = required_field(obj, key, path);
    if (!v.is_string()) throw wrong_type(path + "." + key, "a string");
    return v.get<std::string>();
}

void only_keys(const nlohmann::json& obj, const std::set<std::string>& keys, const std::string& path) {
    for (const auto& [k, v] : obj.items())
        if (!keys.count(k)) throw invalid_param(path + "." + k, "unknown field '" + path + "." + k + "'");
}

std::string joined_text(const nlohmann::json& content, const std::string& path, const std::set<std::string>& types,
                        const std::set<std::string>& keys, const std::string& noun) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw wrong_type(path, "a string or an array of " + noun + "s");
    std::string text;
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string p = path + "[" + std::to_string(i) + "]";
        if (!content[i].is_object()) throw wrong_type(p, "an object");
        const std::string type = string_field(content[i], "type", p);
        if (!types.count(type)) throw unsupported(p + ".type", noun + " type '" + type + "'");
        only_keys(content[i], keys, p);
        text += string_field(content[i], "text", p);
    }
    return text;
}

std::string random_id(const char* prefix) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char kChars[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    std::string id = prefix;
    for (int i = 0; i < 24; ++i) id += kChars[rng() % 62];
    return id;
}

}  // namespace deskside::server
