#include "server/api_error.h"

namespace tq::server {

nlohmann::json ErrorJson(const std::string& message, const std::string& type,
                         const std::string& param, const std::string& code) {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", std::move(e)}};
}

nlohmann::json ApiError::ToJson() const { return ErrorJson(what(), type_, param_, code_); }

ApiError BadRequest(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", message, param);
}

}  // namespace tq::server
