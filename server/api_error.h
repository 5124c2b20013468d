// Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}. Everything a route
// rejects is thrown as an ApiError and turned into a response in one place (http_server.cpp),
// so clients written for OpenAI's API read our errors the same way.
#pragma once

#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace deskside::server {

class ApiError : public std::runtime_error {
   public:
    // type: "invalid_request_error" (4xx the client can fix), "authentication_error",
    // "not_found_error", "server_error", "overloaded_error". param: the request field at fault
    // (a JSON path such as "messages[2].content"), empty for none. code: a short machine code.
    ApiError(int status, std::string message, std::string param = {}, std::string code = {},
             std::string type = "invalid_request_error")
        : std::runtime_error(std::move(message)),
          status_(status),
          param_(std::move(param)),
          code_(std::move(code)),
          type_(std::move(type)) {}

    int status() const { return status_; }
    const std::string& param() const { return param_; }
    const std::string& code() const { return code_; }
    const std::string& type() const { return type_; }

    // The response body; param and code are null when empty, as OpenAI sends them.
    nlohmann::ordered_json body() const;

   private:
    int status_;
    std::string param_;
    std::string code_;
    std::string type_;
};

// A 400 naming the field: "invalid_request_error" with code "invalid_value".
ApiError invalid_param(const std::string& param, const std::string& message);
// A 400 "'param' must be EXPECTED" with code "invalid_type".
ApiError wrong_type(const std::string& param, const std::string& expected);
// A 400 for a parameter OpenAI (or Anthropic) defines that this server cannot honour.
ApiError unsupported(const std::string& param, const std::string& what);

// Request-object helpers that throw the 400s above, naming `path.key`.
const nlohmann::json& required_field(const nlohmann::json& obj, const char* key, const std::string& path);
std::string string_field(const nlohmann::json& obj, const char* key, const std::string& path);
void only_keys(const nlohmann::json& obj, const std::set<std::string>& keys, const std::string& path);

// Message content as the APIs send it: a string, or an array of text parts (objects whose `type`
// is one of `types`, with a string `text` and no keys beyond `keys`), joined. `noun` names a part
// in the errors ("content part", "content block").
std::string joined_text(const nlohmann::json& content, const std::string& path, const std::set<std::string>& types,
                        const std::set<std::string>& keys, const std::string& noun);

// A response id: `prefix` and 24 random letters and digits.
std::string random_id(const char* prefix);

}  // namespace deskside::server
