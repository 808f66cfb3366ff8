// Reading, validating and writing engram_map.safetensors.
#include "engine/checkpoint/engram_map.h"

#include <cstring>

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/util/error.h"

namespace flashdesk {

void validate_engram_token_map(std::span<const int64_t> map, const TextConfig& text,
                               const std::string& file) {
  if (static_cast<int64_t>(map.size()) != text.vocab_size)
    throw FormatError(file, std::string(kEngramMapTensor) + ": has " + std::to_string(map.size()) +
                                " entries; vocab_size is " + std::to_string(text.vocab_size));
  int64_t next_new = 0;
  for (size_t token = 0; token < map.size(); ++token) {
    const int64_t id = map[token];
    if (id < 0 || id > next_new || id >= text.engram_compressed_vocab_size)
      throw FormatError(
          file, std::string(kEngramMapTensor) + "[" + std::to_string(token) + "] = " +
                    std::to_string(id) + ": expected an id already used or the next new one (" +
                    std::to_string(next_new) + "), below engram_compressed_vocab_size " +
                    std::to_string(text.engram_compressed_vocab_size));
    if (id == next_new) ++next_new;
  }
  if (next_new != text.engram_compressed_vocab_size)
    throw FormatError(file, std::string(kEngramMapTensor) + ": uses " + std::to_string(next_new) +
                                " compressed ids; engram_compressed_vocab_size is " +
                                std::to_string(text.engram_compressed_vocab_size));
}

std::vector<int64_t> load_engram_token_map(const std::filesystem::path& path,
                                           const TextConfig& text) {
  const SafetensorsFile file(path);
  const SafetensorsEntry* e = file.find(kEngramMapTensor);
  if (e == nullptr)
    throw FormatError(path.string(), std::string("tensor '") + kEngramMapTensor + "' missing");
  if (e->dtype != DType::I64 || e->shape.size() != 1)
    throw FormatError(path.string(), std::string("tensor '") + kEngramMapTensor +
                                         "' must be I64 [vocab_size], found " +
                                         std::string(dtype_name(e->dtype)) + " of rank " +
                                         std::to_string(e->shape.size()));
  std::vector<int64_t> map(static_cast<size_t>(e->shape[0]));
  std::memcpy(map.data(), file.data(*e), e->nbytes);  // little-endian hosts only (x86-64, arm64)
  validate_engram_token_map(map, text, path.string());
  return map;
}

void write_engram_map(const std::filesystem::path& path, std::span<const int64_t> map,
                      const std::vector<std::vector<int64_t>>& multipliers) {
  auto i64_tensor = [](std::string name, std::vector<int64_t> shape, const int64_t* values) {
    TensorData t{std::move(name), DType::I64, std::move(shape), {}};
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.bytes.resize(static_cast<size_t>(n) * sizeof(int64_t));
    std::memcpy(t.bytes.data(), values, t.bytes.size());
    return t;
  };
  std::vector<int64_t> flat;
  for (const auto& layer : multipliers) flat.insert(flat.end(), layer.begin(), layer.end());
  const int64_t layers = static_cast<int64_t>(multipliers.size());
  const int64_t per_layer = layers ? static_cast<int64_t>(multipliers[0].size()) : 0;
  write_safetensors(path,
                    {i64_tensor(kEngramMapTensor, {static_cast<int64_t>(map.size())}, map.data()),
                     i64_tensor("multipliers", {layers, per_layer}, flat.data())},
                    {{"format", "pt"}});
}

}  // namespace flashdesk
