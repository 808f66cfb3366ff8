// OpenAI-style API errors: what a request did wrong, as the HTTP status and the
// {"error": {"message", "type", "param", "code"}} object clients expect.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

namespace flashdesk::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message,
           std::optional<std::string> param = std::nullopt,
           std::optional<std::string> code = std::nullopt)
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  // 400 invalid_request_error naming the field at fault.
  static ApiError invalid(const std::string& message, std::optional<std::string> param = {},
                          std::optional<std::string> code = {}) {
    return ApiError(400, "invalid_request_error", message, std::move(param), std::move(code));
  }

  int status() const { return status_; }
  // The error object as one JSON line.
  std::string json() const;

 private:
  int status_;
  std::string type_;
  std::optional<std::string> param_;
  std::optional<std::string> code_;
};

}  // namespace flashdesk::server
