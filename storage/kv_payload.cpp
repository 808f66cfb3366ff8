// Serialising KV-source rows of a block of tokens to the block payload and back.
#include "storage/kv_payload.h"

#include <cstring>

#include "engine/util/error.h"

namespace flashdesk::storage {
namespace {

bool is_source(const GlobalKv& g) {
  return g.ratio > 0 && g.entries.defined();
}

int64_t rows_of(const GlobalKv& g, int64_t tokens) {
  FD_CHECK(tokens % g.ratio == 0, "a KV block must hold a multiple of every compress ratio");
  return tokens / g.ratio;
}

}  // namespace

int64_t kv_payload_bytes(const SequenceState& state, int64_t tokens) {
  int64_t bytes = 0;
  for (const GlobalKv& g : state.global)
    if (is_source(g)) bytes += rows_of(g, tokens) * (g.entries.dim(1) + g.index_keys.dim(1));
  return bytes;
}

std::vector<uint8_t> encode_kv_payload(Backend& backend, const SequenceState& state,
                                       int64_t token_begin, int64_t tokens) {
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(kv_payload_bytes(state, tokens)));
  for (const GlobalKv& g : state.global) {
    if (!is_source(g)) continue;
    const GlobalKvRows r = read_global_kv(backend, g, rows_of(g, token_begin), rows_of(g, tokens));
    out.insert(out.end(), r.entries.begin(), r.entries.end());
    out.insert(out.end(), r.index_keys.begin(), r.index_keys.end());
  }
  return out;
}

void append_kv_payload(std::span<const uint8_t> payload, const SequenceState& state, int64_t tokens,
                       std::vector<GlobalKvRows>& rows, std::string_view where) {
  const int64_t expected = kv_payload_bytes(state, tokens);
  if (static_cast<int64_t>(payload.size()) != expected)
    throw FormatError(std::string(where), "KV payload of " + std::to_string(payload.size()) +
                                              " bytes; the model's block of " +
                                              std::to_string(tokens) + " tokens has " +
                                              std::to_string(expected));
  rows.resize(state.global.size());
  size_t at = 0;
  auto take = [&](std::vector<uint8_t>& dst, int64_t n) {
    dst.insert(dst.end(), payload.begin() + static_cast<std::ptrdiff_t>(at),
               payload.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(n)));
    at += static_cast<size_t>(n);
  };
  for (size_t l = 0; l < state.global.size(); ++l) {
    const GlobalKv& g = state.global[l];
    if (!is_source(g)) continue;
    const int64_t n = rows_of(g, tokens);
    take(rows[l].entries, n * g.entries.dim(1));
    take(rows[l].index_keys, n * g.index_keys.dim(1));
    rows[l].n += n;
  }
}

std::vector<GlobalKvRows> read_prefix_rows(Backend& backend, const SequenceState& state,
                                           int64_t tokens) {
  std::vector<GlobalKvRows> rows(state.global.size());
  for (size_t l = 0; l < state.global.size(); ++l)
    if (is_source(state.global[l]))
      rows[l] = read_global_kv(backend, state.global[l], 0, rows_of(state.global[l], tokens));
  return rows;
}

void load_prefix(Backend& backend, SequenceState& fresh, std::span<const int32_t> prefix,
                 const std::vector<GlobalKvRows>& rows) {
  FD_CHECK(fresh.position() == 0 && rows.size() == fresh.global.size(),
           "load_prefix needs a fresh state and one row set per layer");
  for (size_t l = 0; l < fresh.global.size(); ++l) {
    GlobalKv& g = fresh.global[l];
    if (!is_source(g)) continue;
    FD_CHECK(rows[l].n == rows_of(g, static_cast<int64_t>(prefix.size())),
             "load_prefix: rows do not cover the prefix");
    restore_global_kv(backend, g, rows[l]);
  }
  fresh.tokens.assign(prefix.begin(), prefix.end());
  fresh.dead.assign(prefix.size(), 0);
}

}  // namespace flashdesk::storage
