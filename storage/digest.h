// 128-bit digests (XXH3-128, seed 0) used as image digests, KV block keys and prefix digests, and
// the 64-bit XXH3 checksums of block files. The hash is fixed: no per-process seed, so a digest
// computed today equals the one computed by another process or after a restart.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace flashdesk::storage {

// XXH3-128 in its canonical (big-endian) byte order, the order xxhsum prints.
struct Digest128 {
  std::array<uint8_t, 16> bytes{};

  std::string hex() const;  // 32 lower-case hex digits
  static std::optional<Digest128> from_hex(std::string_view hex);
  bool is_zero() const;
  auto operator<=>(const Digest128&) const = default;
};

using ImageDigest = Digest128;  // of the image file's bytes

Digest128 xxh3_128(std::span<const uint8_t> bytes);
uint64_t xxh3_64(std::span<const uint8_t> bytes);

inline std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct Digest128Hash {
  size_t operator()(const Digest128& d) const noexcept;
};

}  // namespace flashdesk::storage
