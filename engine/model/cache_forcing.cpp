// Comparing and setting the global KV from a dump (cache_forcing.h).
#include "engine/model/cache_forcing.h"

#include <algorithm>

#include "engine/util/error.h"

namespace flashdesk {

void CacheAgreement::add(std::span<const float> mine, std::span<const float> theirs,
                         int64_t width) {
  const auto w = static_cast<size_t>(width);
  for (size_t r = 0; r + w <= mine.size() && r + w <= theirs.size(); r += w) {
    int64_t in_row = 0;
    for (size_t i = 0; i < w; ++i) in_row += mine[r + i] != theirs[r + i];
    values += width;
    differing += in_row;
    worst_row = std::max(worst_row, in_row);
  }
}

namespace {

// The dump tensor `name`, F32 with at least `rows` rows of `width`.
std::span<const float> dump_rows(const NamedTensors& dump, const std::string& name, int64_t rows,
                                 int64_t width) {
  auto it = dump.find(name);
  if (it == dump.end()) throw FormatError("", "cache forcing: tensor " + name + " is missing");
  const HostTensor& t = it->second;
  if (t.dtype != DType::F32 || t.shape.size() != 2 || t.shape[1] != width || t.shape[0] < rows)
    throw FormatError("", "cache forcing: tensor " + name + " must be F32 [>= " +
                              std::to_string(rows) + ", " + std::to_string(width) + "]");
  return t.as<float>();
}

}  // namespace

void force_global_kv(Model& model, SequenceState& s, const NamedTensors& dump,
                     const std::string& phase, CacheForcing& forcing) {
  const TextConfig& t = model.config().text;
  Backend& be = model.backend();
  for (const LayerRole& r : model.roles()) {
    GlobalKv& kv = s.global[static_cast<size_t>(r.layer)];
    if (!kv.entries.defined()) continue;
    int64_t& from = forcing.done[r.layer];
    const int64_t n = kv.n_entries;
    if (n <= from) continue;
    const std::string suffix = ".layer" + std::to_string(r.layer);
    struct Kind {
      const char* name;
      KvFormat format;
      int64_t width;
      CacheAgreement* agreement;
      Tensor* rows;
    };
    for (const Kind& k :
         {Kind{"compress_kv", KvFormat::Fp4Entry, t.head_dim, &forcing.entries, &kv.entries},
          Kind{"index_k", KvFormat::Fp4Key, t.index_head_dim, &forcing.keys, &kv.index_keys}}) {
      const std::span<const float> theirs = dump_rows(dump, phase + k.name + suffix, n, k.width);
      const std::vector<float> mine = k.format == KvFormat::Fp4Entry
                                          ? model.dequantized_entries(s, r.layer)
                                          : model.dequantized_index_keys(s, r.layer);
      const auto lo = static_cast<size_t>(from * k.width),
                 len = static_cast<size_t>((n - from) * k.width);
      k.agreement->add(std::span(mine).subspan(lo, len), theirs.subspan(lo, len), k.width);
      // Their values are codes times scales of this very format, so quantising them again gives
      // back the same values.
      Tensor rows = be.alloc(DType::F32, Shape{n - from, k.width});
      be.write(rows, theirs.data() + lo, len * sizeof(float));
      be.quantize_rows(k.format, rows, *k.rows, from);
    }
    from = n;
  }
}

}  // namespace flashdesk
