// Errors returned to HTTP clients in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// Request parsing and validation throw ApiError; the HTTP layer turns it into a response.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tq::server {

class ApiError : public std::runtime_error {
 public:
  // status: the HTTP status. type: OpenAI's error type ("invalid_request_error",
  // "authentication_error", "not_found_error", "server_error", ...). param: the request field at
  // fault ("" when none). code: a short machine-readable code ("" when none).
  ApiError(int status, std::string type, const std::string& message, std::string param = "",
           std::string code = "")
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

  nlohmann::json ToJson() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error naming `param`.
ApiError BadRequest(const std::string& param, const std::string& message);

// The JSON body of an error with the given parts (param/code empty -> null).
nlohmann::json ErrorJson(const std::string& message, const std::string& type,
                         const std::string& param = "", const std::string& code = "");

}  // namespace tq::server
