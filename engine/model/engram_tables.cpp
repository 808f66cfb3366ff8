// Chooses where the Engram token map comes from and checks it against the config and tokenizer.
#include "engine/model/engram_tables.h"

#include <optional>

#include "engine/checkpoint/engram_multipliers.h"
#include "engine/checkpoint/engram_primes.h"
#include "engine/model/engram_map_cache.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

// The tokenizer to build the map from: the caller's, else the directory's tokenizer.json.
const Tokenizer& map_tokenizer(const Checkpoint& checkpoint, const EngramMapOptions& options,
                               std::optional<Tokenizer>& owned) {
  if (options.tokenizer) return *options.tokenizer;
  const auto path = checkpoint.dir() / "tokenizer.json";
  if (!std::filesystem::exists(path))
    throw FormatError((checkpoint.dir() / std::string(kEngramMapFile)).string(),
                      "missing, and there is no tokenizer.json to build the Engram token map "
                      "from (a model with engram_layer_ids needs one of the two)");
  owned.emplace(Tokenizer::from_file(path));
  return *owned;
}

EngramTables built_map(const Checkpoint& checkpoint, const EngramMapOptions& options) {
  const TextConfig& t = checkpoint.config().text;
  std::optional<Tokenizer> owned;
  const Tokenizer& tokenizer = map_tokenizer(checkpoint, options, owned);
  CachedTokenMap cached = cached_compressed_token_map(tokenizer, options.cache_dir);
  if (cached.map.size != t.engram_compressed_vocab_size)
    throw FormatError((checkpoint.dir() / "config.json").string(),
                      "text_config.engram_compressed_vocab_size: " +
                          std::to_string(t.engram_compressed_vocab_size) + ", but " +
                          tokenizer.source() + " has " + std::to_string(cached.map.size) +
                          " compressed tokens over its " + std::to_string(tokenizer.size()) +
                          " entries (every hash multiplier depends on this size)");
  if (t.engram_pad_token_id >= tokenizer.size())
    throw FormatError((checkpoint.dir() / "config.json").string(),
                      "text_config.engram_pad_token_id: " + std::to_string(t.engram_pad_token_id) +
                          " is not a token of " + tokenizer.source() + " (" +
                          std::to_string(tokenizer.size()) + " entries)");
  EngramTables out;
  out.tables.token_map = std::move(cached.map.ids);
  out.map_source = tokenizer.source();
  return out;
}

EngramTables shipped_map(const Checkpoint& checkpoint, const EngramMapOptions& options) {
  EngramTables out;
  out.map_source = (checkpoint.dir() / std::string(kEngramMapFile)).string();
  const auto map = checkpoint.engram_token_map();  // validated by Checkpoint::open
  if (options.tokenizer && static_cast<int64_t>(map.size()) != options.tokenizer->size())
    throw FormatError(out.map_source, "token_map has " + std::to_string(map.size()) +
                                          " entries, but " + options.tokenizer->source() + " has " +
                                          std::to_string(options.tokenizer->size()) +
                                          " (one per token of the tokenizer)");
  out.tables.token_map.assign(map.begin(), map.end());
  return out;
}

}  // namespace

EngramTables load_engram_tables(const Checkpoint& checkpoint, const EngramMapOptions& options) {
  const TextConfig& t = checkpoint.config().text;
  EngramTables out = checkpoint.engram_token_map().empty() ? built_map(checkpoint, options)
                                                           : shipped_map(checkpoint, options);
  out.tables.multipliers = engram_multipliers(t);
  out.tables.primes = engram_primes(t);
  return out;
}

}  // namespace flashdesk
