// SHA-256 (FIPS 180-4), for digests that must be identical across processes and machines:
// the checkpoint fingerprint (over the weights too) and, through it, every KV block key; the
// content keys of stored images. Uses the x86 SHA extensions when the CPU has them (about 2 GB/s
// a core instead of 0.3), the portable compression otherwise; both give the same digest.
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
  // Whether update() uses the SHA extensions on this CPU (for reports).
  static bool hardware_accelerated();

 private:
  void compress_blocks(const uint8_t* blocks, size_t count);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace flashdesk
