// libFuzzer target: whatever bytes the Engram token map cache file holds, loading the map for the
// small test tokenizer gives exactly the map built from it (a bad file is rebuilt, never used).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/model/engram_map_cache.h"

namespace {

using flashdesk::Tokenizer;

const Tokenizer& tiny() {
  static const Tokenizer tok = Tokenizer::from_file(std::filesystem::path(FD_SOURCE_DIR) /
                                                    "tests/data/tokenizers/tiny/tokenizer.json");
  return tok;
}

// This process's scratch folder; each execution removes it again (libFuzzer may leave by _Exit).
const std::filesystem::path& cache_dir() {
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("engram-cache-fuzz-" + std::to_string(::getpid()));
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const flashdesk::CompressedTokenMap expected =
      flashdesk::build_compressed_token_map(tiny());
  std::filesystem::create_directories(cache_dir());
  const auto file = flashdesk::engram_map_cache_file(cache_dir(), tiny());
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  const flashdesk::CachedTokenMap got = flashdesk::cached_compressed_token_map(tiny(), cache_dir());
  if (got.map.ids != expected.ids || got.map.size != expected.size) std::abort();
  std::error_code ec;
  std::filesystem::remove_all(cache_dir(), ec);
  return 0;
}
