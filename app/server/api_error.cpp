// The JSON shape of an API error.
#include "app/server/api_error.h"

#include <nlohmann/json.hpp>

namespace flashdesk::server {

std::string ApiError::json() const {
  const auto or_null = [](const std::optional<std::string>& s) {
    return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
  };
  const nlohmann::json j = {{"error",
                             {{"message", what()},
                              {"type", type_},
                              {"param", or_null(param_)},
                              {"code", or_null(code_)}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace flashdesk::server
