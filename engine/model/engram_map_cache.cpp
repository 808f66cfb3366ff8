// Reading (with every check) and writing the Engram token map cache file.
#include "engine/model/engram_map_cache.h"

#include <charconv>
#include <cstring>
#include <map>
#include <span>
#include <variant>

#include "engine/checkpoint/engram_map.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/tokenizer/engram_normalizer.h"
#include "engine/util/error.h"
#include "engine/util/sha256.h"

namespace flashdesk {
namespace {

// Bump when the build rule changes, so files of an older rule are rebuilt.
constexpr const char* kFormat = "flashdesk-engram-token-map-v1";

std::string digest_of(std::span<const int64_t> ids) {
  Sha256 h;
  h.update(std::span(reinterpret_cast<const uint8_t*>(ids.data()), ids.size_bytes()));
  return Sha256::hex(h.finish());
}

std::string metadata_value(const std::map<std::string, std::string>& m, const char* key) {
  const auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

// The map in the file, or the reason it cannot be used.
std::variant<CompressedTokenMap, std::string> read_cache_file(const std::filesystem::path& path,
                                                              const Tokenizer& tokenizer) {
  const SafetensorsFile file(path);  // throws FormatError / IoError when unreadable
  const auto& meta = file.metadata();
  if (metadata_value(meta, "format") != kFormat) return std::string("another format");
  if (metadata_value(meta, "tokenizer_sha256") != tokenizer.sha256())
    return std::string("made for another tokenizer");
  if (metadata_value(meta, "unicode_version") != engram_normalizer_unicode_version())
    return "made with Unicode " + metadata_value(meta, "unicode_version");
  const SafetensorsEntry* e = file.find(kEngramMapTensor);
  if (e == nullptr || e->dtype != DType::I64 || e->shape.size() != 1 ||
      e->shape[0] != tokenizer.size())
    return "no I64 token_map of " + std::to_string(tokenizer.size()) + " entries";
  CompressedTokenMap map;
  map.ids.resize(static_cast<size_t>(e->shape[0]));
  std::memcpy(map.ids.data(), file.data(*e), e->nbytes);
  if (digest_of(map.ids) != metadata_value(meta, "token_map_sha256"))
    return std::string("its bytes do not match their SHA-256");
  const std::string size_text = metadata_value(meta, "compressed_vocab_size");
  const auto [end, ec] =
      std::from_chars(size_text.data(), size_text.data() + size_text.size(), map.size);
  if (ec != std::errc() || end != size_text.data() + size_text.size())
    return "compressed_vocab_size '" + size_text + "' is not a number";
  const std::string problem = token_map_problem(map.ids, map.size);
  if (!problem.empty()) return problem;
  return map;
}

void write_cache_file(const std::filesystem::path& path, const Tokenizer& tokenizer,
                      const CompressedTokenMap& map) {
  std::filesystem::create_directories(path.parent_path());
  TensorData t{kEngramMapTensor, DType::I64, {static_cast<int64_t>(map.ids.size())}, {}};
  t.bytes.resize(map.ids.size() * sizeof(int64_t));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), map.ids.data(), t.bytes.size());
  write_safetensors(path, {t},
                    {{"format", kFormat},
                     {"tokenizer_sha256", tokenizer.sha256()},
                     {"tokenizer", tokenizer.source()},
                     {"unicode_version", engram_normalizer_unicode_version()},
                     {"compressed_vocab_size", std::to_string(map.size)},
                     {"token_map_sha256", digest_of(map.ids)}});
}

}  // namespace

std::filesystem::path engram_map_cache_file(const std::filesystem::path& cache_dir,
                                            const Tokenizer& tokenizer) {
  return cache_dir / ("engram-map-" + tokenizer.sha256() + ".safetensors");
}

CachedTokenMap cached_compressed_token_map(const Tokenizer& tokenizer,
                                           const std::filesystem::path& cache_dir) {
  CachedTokenMap out;
  const std::filesystem::path path =
      cache_dir.empty() ? std::filesystem::path() : engram_map_cache_file(cache_dir, tokenizer);
  std::error_code ec;
  if (!path.empty() && std::filesystem::exists(path, ec)) {
    try {
      auto read = read_cache_file(path, tokenizer);
      if (auto* map = std::get_if<CompressedTokenMap>(&read)) {
        out.map = std::move(*map);
        out.origin = TokenMapOrigin::Cache;
        return out;
      }
      out.note = path.string() + ": rebuilt, " + std::get<std::string>(read);
    } catch (const Error& e) {
      out.note = std::string("rebuilt: ") + e.what();
    }
  }
  out.map = build_compressed_token_map(tokenizer);
  if (path.empty()) return out;
  try {
    write_cache_file(path, tokenizer, out.map);
  } catch (const std::exception& e) {  // IoError, filesystem_error: the map is still good
    out.note += (out.note.empty() ? "" : "; ") + std::string("not cached: ") + e.what();
  }
  return out;
}

}  // namespace flashdesk
