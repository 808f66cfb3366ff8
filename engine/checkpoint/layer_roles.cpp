// Per-layer CSA2 roles from compress_ratios and the source-layer lists (docs/model-spec.md §1.2
// table and §3.6), and the first layer of the CED decoder.
#include <algorithm>
#include <string>

#include "engine/checkpoint/config.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

const std::string T = "text_config.";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw FormatError("", path + ": " + what);
}

bool contains(const std::vector<int64_t>& ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Every listed layer exists, has a compressed path (ratio > 0), and ids increase.
void check_source_list(const TextConfig& t, const std::vector<int64_t>& ids, const char* field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string at = T + field + "[" + std::to_string(i) + "]";
    if (ids[i] < 0 || ids[i] >= t.num_hidden_layers)
      fail(at, "layer " + std::to_string(ids[i]) + " does not exist (num_hidden_layers " +
                   std::to_string(t.num_hidden_layers) + ")");
    if (i > 0 && ids[i] <= ids[i - 1]) fail(at, "layer ids must be strictly increasing");
    if (t.compress_ratios[ids[i]] == 0)
      fail(at, "layer " + std::to_string(ids[i]) + " has compress ratio 0 (window only)");
  }
}

// The nearest KV source <= layer with the layer's compress ratio, or -1.
int64_t nearest_kv_source(const TextConfig& t, int64_t layer) {
  for (int64_t l = layer; l >= 0; --l)
    if (contains(t.kv_source_layer_ids, l) && t.compress_ratios[l] == t.compress_ratios[layer])
      return l;
  return -1;
}

int64_t nearest_index_source(const TextConfig& t, int64_t layer) {
  for (int64_t l = layer; l >= 0; --l)
    if (contains(t.index_source_layer_ids, l)) return l;
  return -1;
}

LayerRole compressed_layer_role(const TextConfig& t, int64_t l) {
  LayerRole r;
  r.layer = l;
  r.compress_ratio = t.compress_ratios[l];
  const bool kv = contains(t.kv_source_layer_ids, l);
  const bool index = contains(t.index_source_layer_ids, l);
  r.role = kv ? AttnRole::Full : index ? AttnRole::Reindex : AttnRole::Reuse;
  r.kv_source = nearest_kv_source(t, l);
  r.index_source = nearest_index_source(t, l);
  const std::string at =
      "layer " + std::to_string(l) + " (ratio " + std::to_string(r.compress_ratio) + ")";
  if (r.kv_source < 0)
    fail(T + "kv_source_layer_ids", at + " has no KV source at or before it with the same ratio");
  if (kv && !index)
    fail(T + "index_source_layer_ids",
         "KV source layer " + std::to_string(l) +
             " must also be an index source (Full layers own an indexer)");
  if (r.index_source < 0)
    fail(T + "index_source_layer_ids", at + " has no index source at or before it");
  return r;
}

}  // namespace

std::vector<LayerRole> derive_layer_roles(const TextConfig& t) {
  if (static_cast<int64_t>(t.compress_ratios.size()) < t.num_hidden_layers)
    fail(T + "compress_ratios", "has fewer entries than num_hidden_layers");
  check_source_list(t, t.kv_source_layer_ids, "kv_source_layer_ids");
  check_source_list(t, t.index_source_layer_ids, "index_source_layer_ids");
  std::vector<LayerRole> roles;
  for (int64_t l = 0; l < t.num_hidden_layers; ++l) {
    if (t.compress_ratios[l] == 0) {
      LayerRole r;
      r.layer = l;
      roles.push_back(r);
    } else {
      roles.push_back(compressed_layer_role(t, l));
    }
    roles.back().engram = contains(t.engram_layer_ids, l);
  }
  // A layer's top-k indexes its KV source's entries: the index source must read the same KV.
  for (const LayerRole& r : roles) {
    if (r.role == AttnRole::WindowOnly) continue;
    if (roles[r.index_source].kv_source != r.kv_source)
      fail(T + "index_source_layer_ids",
           "layer " + std::to_string(r.layer) + " reads the KV of layer " +
               std::to_string(r.kv_source) + " but its index source " +
               std::to_string(r.index_source) + " indexes layer " +
               std::to_string(roles[r.index_source].kv_source));
  }
  if (t.candidate_source_layer_id) {
    const int64_t c = *t.candidate_source_layer_id;
    const std::string at = T + "candidate_source_layer_id";
    if (c < 0 || c >= t.num_hidden_layers)
      fail(at, "layer " + std::to_string(c) + " does not exist");
    if (roles[c].role != AttnRole::Full)
      fail(at, "layer " + std::to_string(c) +
                   " is not a KV source (the candidate source must be Full)");
    roles[c].builds_candidates = true;
    for (LayerRole& r : roles)
      if (r.role == AttnRole::Reindex && r.kv_source == c) r.candidate_source = c;
  }
  const int64_t first = decoder_first_layer(t);
  for (LayerRole& r : roles) r.decoder = r.layer >= first;
  return roles;
}

int64_t decoder_first_layer(const TextConfig& t) {
  if (t.kv_source_layer_ids.empty()) return t.num_hidden_layers;
  const int64_t last = t.kv_source_layer_ids.back();
  if (last < 0 || last >= t.num_hidden_layers ||
      static_cast<int64_t>(t.compress_ratios.size()) < t.num_hidden_layers)
    return t.num_hidden_layers;
  for (int64_t l = last; l < t.num_hidden_layers; ++l) {
    if (contains(t.engram_layer_ids, l)) return t.num_hidden_layers;
    if (t.compress_ratios[l] == 0) return t.num_hidden_layers;
    if (l > last && contains(t.kv_source_layer_ids, l)) return t.num_hidden_layers;
    // Same ratio: nearest_kv_source(l) is `last` only if the ratio matches.
    if (t.compress_ratios[l] != t.compress_ratios[last]) return t.num_hidden_layers;
  }
  return last;
}

}  // namespace flashdesk
