#include "server/api_error.h"

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

}  // namespace deskside::server
