// Test fixture: `make-random` writes Engram's token map but not the hash multipliers that
// docs (tools/README.md "engram_map.safetensors") place beside it; this adds fixed odd
// multipliers below the int64 overflow bound (any such values are valid) when they are absent.
#pragma once

#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/safetensors_writer.h"

namespace flashdesk::test {

inline void add_engram_multipliers(const std::filesystem::path& dir) {
  const auto path = dir / "engram_map.safetensors";
  if (!std::filesystem::exists(path)) return;
  std::vector<uint8_t> map_bytes;
  int64_t n = 0;
  {
    SafetensorsFile f(path);
    if (f.find("multipliers")) return;
    const SafetensorsEntry* e = f.find("token_map");
    map_bytes.assign(f.data(*e), f.data(*e) + e->nbytes);
    n = e->shape[0];
  }
  const ModelConfig cfg = load_model_config((dir / "config.json").string());
  const int64_t layers = static_cast<int64_t>(cfg.text.engram_layer_ids.size());
  const int64_t ngram = cfg.text.engram_max_ngram_size;
  const int64_t bound = (INT64_MAX / cfg.text.engram_compressed_vocab_size) / 2;
  std::vector<int64_t> mult;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < layers * ngram; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    mult.push_back(static_cast<int64_t>((x >> 1) % static_cast<uint64_t>(bound)) * 2 + 1);
  }
  std::vector<uint8_t> mult_bytes(mult.size() * 8);
  std::memcpy(mult_bytes.data(), mult.data(), mult_bytes.size());
  write_safetensors(path, {TensorData{"token_map", DType::I64, {n}, map_bytes},
                           TensorData{"multipliers", DType::I64, {layers, ngram}, mult_bytes}});
}

}  // namespace flashdesk::test
