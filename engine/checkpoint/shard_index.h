// Which files hold a checkpoint's tensors: model.safetensors.index.json (weight_map: tensor ->
// shard file) or a single model.safetensors.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace flashdesk {

struct ShardIndex {
  std::filesystem::path index_file;               // empty for a single model.safetensors
  std::vector<std::string> shards;                // file names in the directory, sorted
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name (empty if single)
};

// Reads the index (or finds the single file). Throws FormatError naming the index file and the
// field for malformed JSON or unsafe shard names, naming each missing shard; IoError when the
// directory holds neither layout.
ShardIndex find_shards(const std::filesystem::path& dir);

// Parses index JSON text (pure: fuzzable); `file` names it in errors.
ShardIndex parse_shard_index(std::string_view json_text, const std::string& file);

}  // namespace flashdesk
