// API key loading and the constant-time bearer check (api_key.h).
#include "app/server/api_key.h"

#include <fstream>

#include "engine/util/error.h"

namespace flashdesk::server {

std::string read_api_key_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read the API key file " + path.string());
  std::string key;
  std::getline(in, key);
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  if (key.empty()) throw InvalidRequest("the API key file " + path.string() + " is empty");
  return key;
}

bool bearer_matches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view kScheme = "Bearer ";
  if (key.empty() || !authorization.starts_with(kScheme)) return false;
  const std::string_view given = authorization.substr(kScheme.size());
  // Every byte of the key is compared, against the given one or a zero past its end, so the time
  // taken tells nothing of how much of the key was right.
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(key[i]);
  }
  return diff == 0;
}

bool is_loopback(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

}  // namespace flashdesk::server
