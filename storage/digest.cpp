// XXH3 wrappers: seed 0 always, canonical byte order for 128-bit results.
#include "storage/digest.h"

#include <cstring>

#include <xxhash.h>

namespace flashdesk::storage {

namespace {
constexpr char kHexDigits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string Digest128::hex() const {
  std::string out(32, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kHexDigits[bytes[i] >> 4];
    out[2 * i + 1] = kHexDigits[bytes[i] & 15];
  }
  return out;
}

std::optional<Digest128> Digest128::from_hex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  Digest128 d;
  for (size_t i = 0; i < d.bytes.size(); ++i) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return d;
}

bool Digest128::is_zero() const {
  for (uint8_t b : bytes)
    if (b != 0) return false;
  return true;
}

Digest128 xxh3_128(std::span<const uint8_t> bytes) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(bytes.data(), bytes.size()));
  Digest128 d;
  std::memcpy(d.bytes.data(), canonical.digest, d.bytes.size());
  return d;
}

uint64_t xxh3_64(std::span<const uint8_t> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

size_t Digest128Hash::operator()(const Digest128& d) const noexcept {
  size_t h;
  std::memcpy(&h, d.bytes.data(), sizeof h);  // the digest is already uniformly distributed
  return h;
}

}  // namespace flashdesk::storage
