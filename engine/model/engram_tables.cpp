// Reads the Engram token map and multipliers of a model directory (engram_map.safetensors) and
// computes the primes of every Engram layer from the config.
#include "engine/model/engram_tables.h"

#include <cstring>

#include "engine/checkpoint/engram_primes.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/util/error.h"

namespace flashdesk {

EngramHashTables load_engram_tables(const Checkpoint& checkpoint) {
  const TextConfig& t = checkpoint.config().text;
  const std::filesystem::path path = checkpoint.dir() / std::string(kEngramMapFile);
  const std::string file = path.string();
  if (!std::filesystem::exists(path))
    throw FormatError(file,
                      "missing: a model with Engram layers needs its token map and "
                      "multipliers (tensors token_map and multipliers)");
  SafetensorsFile st(path);
  auto read_i64 = [&](const char* name, const std::vector<int64_t>& shape) {
    const SafetensorsEntry* e = st.find(name);
    if (!e) throw FormatError(file, std::string("tensor ") + name + " is missing");
    if (e->dtype != DType::I64 || e->shape.size() != shape.size())
      throw FormatError(file, std::string("tensor ") + name + " must be I64 of rank " +
                                  std::to_string(shape.size()));
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] >= 0 && e->shape[i] != shape[i])
        throw FormatError(file, std::string("tensor ") + name + " dim " + std::to_string(i) +
                                    " is " + std::to_string(e->shape[i]) + ", expected " +
                                    std::to_string(shape[i]));
    std::vector<int64_t> v(e->nbytes / 8);
    std::memcpy(v.data(), st.data(*e), e->nbytes);
    return std::pair{v, e->shape};
  };
  EngramHashTables tables;
  tables.token_map = read_i64("token_map", {-1}).first;
  const int64_t n_layers = static_cast<int64_t>(t.engram_layer_ids.size());
  const auto [mult, shape] = read_i64("multipliers", {n_layers, t.engram_max_ngram_size});
  for (int64_t l = 0; l < n_layers; ++l)
    tables.multipliers.emplace_back(mult.begin() + l * shape[1], mult.begin() + (l + 1) * shape[1]);
  tables.primes = engram_primes(t);
  return tables;
}

}  // namespace flashdesk
