// Test fixture: adds the hash multipliers of random_engram_multipliers() to an Engram map file
// that has only the token map (files written before `make-random` wrote both).
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/checkpoint/engram_map.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/safetensors.h"

namespace flashdesk::test {

inline void add_engram_multipliers(const std::filesystem::path& dir) {
  const auto path = dir / "engram_map.safetensors";
  if (!std::filesystem::exists(path)) return;
  std::vector<int64_t> map;
  {
    SafetensorsFile f(path);
    if (f.find("multipliers")) return;
    const SafetensorsEntry* e = f.find("token_map");
    map.resize(static_cast<size_t>(e->shape[0]));
    std::memcpy(map.data(), f.data(*e), e->nbytes);
  }
  const ModelConfig cfg = load_model_config((dir / "config.json").string());
  write_engram_map(path, map, random_engram_multipliers(cfg.text));
}

}  // namespace flashdesk::test
