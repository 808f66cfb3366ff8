// Reading, validating and writing engram_map.safetensors.
#include "engine/checkpoint/engram_map.h"

#include <cstring>

#include "engine/checkpoint/engram_multipliers.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

std::string list_text(std::span<const int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// One I64 tensor of the file, copied out; FormatError when it is not I64 of rank `rank`.
std::vector<int64_t> read_i64(const SafetensorsFile& file, const SafetensorsEntry& e, size_t rank,
                              const char* layout) {
  if (e.dtype != DType::I64 || e.shape.size() != rank)
    throw FormatError(file.path().string(), "tensor '" + e.name + "' must be I64 " + layout +
                                                ", found " + std::string(dtype_name(e.dtype)) +
                                                " of rank " + std::to_string(e.shape.size()));
  std::vector<int64_t> v(static_cast<size_t>(e.nbytes / sizeof(int64_t)));
  std::memcpy(v.data(), file.data(e), e.nbytes);  // little-endian hosts only (x86-64, arm64)
  return v;
}

void check_multipliers(const SafetensorsFile& file, const SafetensorsEntry& e,
                       const TextConfig& text) {
  const std::vector<int64_t> found = read_i64(file, e, 2, "[engram layers, max n-gram size]");
  const auto expected = engram_multipliers(text);
  std::vector<int64_t> flat;
  for (const auto& row : expected) flat.insert(flat.end(), row.begin(), row.end());
  const std::vector<int64_t> shape = {static_cast<int64_t>(expected.size()),
                                      text.engram_max_ngram_size};
  if (e.shape != shape || found != flat)
    throw FormatError(file.path().string(),
                      std::string(kEngramMultipliersTensor) + " " + list_text(e.shape) + " = " +
                          list_text(found) + " differ from the official multipliers " +
                          list_text(shape) + " = " + list_text(flat) +
                          " (numpy default_rng(10007 * layer) for engram_layer_ids " +
                          list_text(text.engram_layer_ids) + ", engram_compressed_vocab_size " +
                          std::to_string(text.engram_compressed_vocab_size) + ")");
}

}  // namespace

std::string token_map_problem(std::span<const int64_t> map, int64_t compressed_size) {
  int64_t next_new = 0;
  for (size_t token = 0; token < map.size(); ++token) {
    const int64_t id = map[token];
    if (id < 0 || id > next_new || id >= compressed_size)
      return std::string(kEngramMapTensor) + "[" + std::to_string(token) +
             "] = " + std::to_string(id) + ": expected an id already used or the next new one (" +
             std::to_string(next_new) + "), below " + std::to_string(compressed_size);
    if (id == next_new) ++next_new;
  }
  if (next_new != compressed_size)
    return std::string(kEngramMapTensor) + ": uses " + std::to_string(next_new) +
           " compressed ids, not " + std::to_string(compressed_size);
  return {};
}

void validate_engram_token_map(std::span<const int64_t> map, const TextConfig& text,
                               const std::string& file) {
  if (static_cast<int64_t>(map.size()) <= text.engram_pad_token_id)
    throw FormatError(file, std::string(kEngramMapTensor) + ": has " + std::to_string(map.size()) +
                                " entries, none for engram_pad_token_id " +
                                std::to_string(text.engram_pad_token_id));
  const std::string problem = token_map_problem(map, text.engram_compressed_vocab_size);
  if (!problem.empty())
    throw FormatError(file, problem + " (engram_compressed_vocab_size " +
                                std::to_string(text.engram_compressed_vocab_size) + ")");
}

std::vector<int64_t> load_engram_token_map(const std::filesystem::path& path,
                                           const TextConfig& text) {
  const SafetensorsFile file(path);
  const SafetensorsEntry* e = file.find(kEngramMapTensor);
  if (e == nullptr)
    throw FormatError(path.string(), std::string("tensor '") + kEngramMapTensor + "' missing");
  std::vector<int64_t> map = read_i64(file, *e, 1, "[len(tokenizer)]");
  validate_engram_token_map(map, text, path.string());
  if (const SafetensorsEntry* m = file.find(kEngramMultipliersTensor))
    check_multipliers(file, *m, text);
  return map;
}

void write_engram_map(const std::filesystem::path& path, std::span<const int64_t> map,
                      const std::vector<std::vector<int64_t>>& multipliers) {
  auto i64_tensor = [](std::string name, std::vector<int64_t> shape, const int64_t* values) {
    TensorData t{std::move(name), DType::I64, std::move(shape), {}};
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.bytes.resize(static_cast<size_t>(n) * sizeof(int64_t));
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), values, t.bytes.size());
    return t;
  };
  std::vector<int64_t> flat;
  for (const auto& layer : multipliers) flat.insert(flat.end(), layer.begin(), layer.end());
  const int64_t layers = static_cast<int64_t>(multipliers.size());
  const int64_t per_layer = layers ? static_cast<int64_t>(multipliers[0].size()) : 0;
  write_safetensors(path,
                    {i64_tensor(kEngramMapTensor, {static_cast<int64_t>(map.size())}, map.data()),
                     i64_tensor(kEngramMultipliersTensor, {layers, per_layer}, flat.data())},
                    {{"format", "pt"}});
}

}  // namespace flashdesk
