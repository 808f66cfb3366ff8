// Helpers for checkpoint tests: a temporary directory (RAII), file bytes, and the committed
// test configs.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/checkpoint/random_checkpoint.h"

namespace flashdesk::testing {

// Options for write_random_checkpoint (GCC warns on designated initializers that skip members).
inline RandomCheckpointOptions random_options(uint64_t seed, uint64_t shard_bytes = 0,
                                              int threads = 0, std::vector<int64_t> layers = {}) {
  RandomCheckpointOptions o;
  o.seed = seed;
  o.shard_bytes = shard_bytes;
  o.threads = threads;
  o.layers = std::move(layers);
  return o;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fdckpt-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& p, const void* data, size_t n) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

inline void write_text(const std::filesystem::path& p, const std::string& s) {
  write_bytes(p, s.data(), s.size());
}

inline std::filesystem::path config_asset(const std::string& name) {
  return std::filesystem::path(FD_SOURCE_DIR) / "assets" / "configs" / name;
}

}  // namespace flashdesk::testing
