// Teacher forcing of the global KV (docs/goldens.md, "GoldenOfficial"): before a step reads them,
// the compressed entries and index keys of every KV source are compared with a dump's and set to
// its values, so each block is measured on another implementation's inputs *and* state. A cached
// value on the other side of a rounding tie would otherwise be read by every later step.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "engine/model/dump_recorder.h"
#include "engine/model/model.h"

namespace flashdesk {

// How one kind of cached value compares with the dump's.
struct CacheAgreement {
  int64_t values = 0, differing = 0;
  int64_t worst_row = 0;  // the most differing values in one cached row
  void add(std::span<const float> mine, std::span<const float> theirs, int64_t width);
};

struct CacheForcing {
  CacheAgreement entries, keys;
  std::map<int64_t, int64_t> done;  // per KV source: entries already compared and set
};

// For every KV source, entries [done, n_entries) of `s`: compared with the dump's
// `<phase>compress_kv.layer<i>` and `<phase>index_k.layer<i>` (F32 [E, dim], at least
// n_entries rows), then overwritten with them. FormatError when a tensor is missing or short.
void force_global_kv(Model& model, SequenceState& s, const NamedTensors& dump,
                     const std::string& phase, CacheForcing& forcing);

}  // namespace flashdesk
