// XXH3 wrappers (seed 0 always, canonical byte order for 128-bit results), SHA-256 through the
// engine's, and the hex forms of digests.
#include "storage/digest.h"

#include <cstring>

#include <xxhash.h>

#include "engine/util/sha256.h"

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

template <size_t N>
std::string Digest<N>::hex() const {
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = kHexDigits[bytes[i] >> 4];
    out[2 * i + 1] = kHexDigits[bytes[i] & 15];
  }
  return out;
}

template <size_t N>
std::optional<Digest<N>> Digest<N>::from_hex(std::string_view hex) {
  if (hex.size() != 2 * N) return std::nullopt;
  Digest d;
  for (size_t i = 0; i < N; ++i) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return d;
}

template <size_t N>
bool Digest<N>::is_zero() const {
  for (uint8_t b : bytes)
    if (b != 0) return false;
  return true;
}

template struct Digest<16>;
template struct Digest<32>;

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

Digest256 sha256(std::span<const uint8_t> bytes) {
  Sha256 h;
  h.update(bytes);
  return Digest256{h.finish()};
}

}  // namespace flashdesk::storage
