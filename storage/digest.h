// Digests of the storage layer. XXH3 (seed 0) for what only has to be fast and stable: KV block
// keys, prefix digests and the 64-bit checksums of block files. SHA-256 for content keys that an
// outside file could try to collide: an image's digest names its stored file (two images with one
// digest would be stored as one) and enters the KV block keys of its prompt. Every hash is fixed
// (no per-process seed), so a digest computed today equals the one computed by another process or
// after a restart.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace flashdesk::storage {

// N digest bytes in canonical (big-endian) order, the order xxhsum and sha256sum print.
template <size_t N>
struct Digest {
  std::array<uint8_t, N> bytes{};

  std::string hex() const;                                      // 2N lower-case hex digits
  static std::optional<Digest> from_hex(std::string_view hex);  // any case; nothing if malformed
  bool is_zero() const;
  auto operator<=>(const Digest&) const = default;
};

using Digest128 = Digest<16>;  // XXH3-128
using Digest256 = Digest<32>;  // SHA-256

using ImageDigest = Digest256;  // SHA-256 of the image file's bytes

Digest128 xxh3_128(std::span<const uint8_t> bytes);
uint64_t xxh3_64(std::span<const uint8_t> bytes);
Digest256 sha256(std::span<const uint8_t> bytes);

inline std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// For unordered containers keyed by a digest (its first bytes are already uniform).
struct DigestHash {
  template <size_t N>
  size_t operator()(const Digest<N>& d) const noexcept {
    static_assert(N >= sizeof(size_t));
    size_t h = 0;
    for (size_t i = 0; i < sizeof h; ++i) h = (h << 8) | d.bytes[i];
    return h;
  }
};
using Digest128Hash = DigestHash;  // the name callers used when every digest was XXH3-128

}  // namespace flashdesk::storage
