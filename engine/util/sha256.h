// SHA-256 (FIPS 180-4), for digests that must be identical across processes and machines:
// the checkpoint fingerprint and, through it, every KV block key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace flashdesk {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void update(std::span<const uint8_t> bytes);
  void update(std::string_view text);
  // Appends `v` as 8 little-endian bytes (lengths and sizes in digested streams).
  void update_u64(uint64_t v);
  // Pads and returns the digest; the object must not be updated afterwards.
  Digest finish();

  static std::string hex(const Digest& digest);

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace flashdesk
