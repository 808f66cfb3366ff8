// Shared helpers of the storage tests: temporary folders, a clock the test moves, settings.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "storage/session_types.h"
#include "storage/storage_layout.h"

namespace flashdesk::storage::testing {

// A fresh folder under $TMPDIR (or /tmp), removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/fd-storage-XXXXXX";
    if (!::mkdtemp(pattern.data())) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  StorageLayout layout() const { return StorageLayout::in(path_); }

 private:
  std::filesystem::path path_;
};

// A clock that moves only when told to (milliseconds since the epoch).
class ManualClock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  Clock clock() {
    return [this] { return now_.load(); };
  }
  void advance_ms(int64_t ms) { now_ += ms; }
  int64_t now() const { return now_; }

 private:
  std::atomic<int64_t> now_;
};

inline SessionSettings test_settings(std::string fingerprint = "model-A") {
  SessionSettings s;
  s.model_fingerprint = std::move(fingerprint);
  s.effort = 60;
  s.thinking = true;
  s.system_prompt = "You are a helpful assistant.";
  s.sampling.temperature = 0.7f;
  s.sampling.top_p = 0.9f;
  s.sampling.seed = 0xfedcba9876543210ull;
  s.max_new_tokens = 512;
  return s;
}

// Deterministic pseudo-random bytes (splitmix64 of seed and index): payloads the test can recheck.
inline std::vector<uint8_t> pattern_bytes(uint64_t seed, size_t n) {
  std::vector<uint8_t> out(n);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    for (size_t k = 0; k < 8 && i + k < n; ++k) out[i + k] = static_cast<uint8_t>(z >> (8 * k));
  }
  return out;
}

// Token i of a synthetic answer: the test can tell a missing or reordered token.
inline TokenId synthetic_token(int64_t i) {
  return static_cast<TokenId>((i * 7919 + 13) % 129280);
}

}  // namespace flashdesk::storage::testing
