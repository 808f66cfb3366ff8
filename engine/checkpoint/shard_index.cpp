// Parsing model.safetensors.index.json and locating the shard files.
#include "engine/checkpoint/shard_index.h"

#include <set>

#include "engine/checkpoint/json_fields.h"
#include "engine/util/error.h"
#include "engine/util/file_io.h"

namespace flashdesk {
namespace {

// Shards must be plain file names inside the model directory: no paths, no "..".
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

ShardIndex parse_shard_index(std::string_view json_text, const std::string& file) {
  const nlohmann::json doc = parse_json_text(json_text, file);
  const JsonFields top(doc, "", file);
  const nlohmann::json* map = top.object("weight_map");
  if (map == nullptr) throw FormatError(file, "weight_map: missing");
  ShardIndex index;
  index.index_file = file;
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string())
      throw FormatError(file, "weight_map." + tensor + ": expected a shard file name");
    const std::string name = shard.get<std::string>();
    if (!is_plain_file_name(name))
      throw FormatError(file, "weight_map." + tensor + ": '" + name +
                                  "' is not a file name inside the model directory");
    index.weight_map.emplace(tensor, name);
    shards.insert(name);
  }
  index.shards.assign(shards.begin(), shards.end());
  return index;
}

ShardIndex find_shards(const std::filesystem::path& dir) {
  const auto index_path = dir / "model.safetensors.index.json";
  const auto single_path = dir / "model.safetensors";
  if (std::filesystem::exists(index_path)) {
    ShardIndex index = parse_shard_index(read_small_file(index_path), index_path.string());
    std::string missing;
    for (const std::string& shard : index.shards)
      if (!std::filesystem::exists(dir / shard)) missing += (missing.empty() ? "" : ", ") + shard;
    if (!missing.empty())
      throw FormatError(index_path.string(), "weight_map names missing shard file(s): " + missing);
    return index;
  }
  if (std::filesystem::exists(single_path)) return ShardIndex{{}, {"model.safetensors"}, {}};
  throw IoError(dir.string() + ": no model.safetensors.index.json or model.safetensors");
}

}  // namespace flashdesk
