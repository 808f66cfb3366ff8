// libFuzzer target: model.safetensors.index.json parsing (weight_map with untrusted file names).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/checkpoint/shard_index.h"
#include "engine/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto index = flashdesk::parse_shard_index(text, "fuzz/model.safetensors.index.json");
    for (const auto& shard : index.shards)
      if (shard.find('/') != std::string::npos || shard == "..") __builtin_trap();
  } catch (const flashdesk::FormatError&) {
  }
  return 0;
}
