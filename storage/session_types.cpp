// Conversions and validation of the session types.
#include "storage/session_types.h"

#include <bit>
#include <cstring>

#include "engine/util/error.h"

namespace flashdesk::storage {

static_assert(std::endian::native == std::endian::little,
              "token blobs are little-endian int32; add a byte swap for big-endian hosts");

std::string_view to_string(Role role) {
  return role == Role::user ? "user" : "assistant";
}

std::string_view to_string(MessageStatus status) {
  return status == MessageStatus::complete ? "complete" : "interrupted";
}

std::optional<Role> parse_role(std::string_view s) {
  if (s == "user") return Role::user;
  if (s == "assistant") return Role::assistant;
  return std::nullopt;
}

std::optional<MessageStatus> parse_status(std::string_view s) {
  if (s == "complete") return MessageStatus::complete;
  if (s == "interrupted") return MessageStatus::interrupted;
  return std::nullopt;
}

void SessionSettings::validate() const {
  if (effort < 1 || effort > 100)
    throw InvalidRequest("effort must be between 1 and 100, got " + std::to_string(effort));
  if (max_new_tokens < 1)
    throw InvalidRequest("max_new_tokens must be at least 1, got " +
                         std::to_string(max_new_tokens));
  sampling.validate();
}

ImageDigest image_digest(std::span<const uint8_t> image_bytes) {
  return sha256(image_bytes);
}

std::vector<uint8_t> encode_token_ids(std::span<const TokenId> ids) {
  std::vector<uint8_t> blob(ids.size() * sizeof(TokenId));
  if (!ids.empty()) std::memcpy(blob.data(), ids.data(), blob.size());
  return blob;
}

std::vector<TokenId> decode_token_ids(std::span<const uint8_t> blob, std::string_view where) {
  if (blob.size() % sizeof(TokenId) != 0)
    throw FormatError(std::string(where), "token id blob of " + std::to_string(blob.size()) +
                                              " bytes is not a whole number of int32");
  std::vector<TokenId> ids(blob.size() / sizeof(TokenId));
  if (!ids.empty()) std::memcpy(ids.data(), blob.data(), blob.size());
  return ids;
}

}  // namespace flashdesk::storage
