// Base64 (RFC 4648, standard alphabet, padded) for images inside exported sessions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashdesk::storage {

std::string base64_encode(std::span<const uint8_t> bytes);
// Strict: the length is a multiple of 4, only the alphabet, '=' only as final padding, and the
// unused bits of the last group are zero. Empty optional otherwise.
std::optional<std::vector<uint8_t>> base64_decode(std::string_view text);

}  // namespace flashdesk::storage
