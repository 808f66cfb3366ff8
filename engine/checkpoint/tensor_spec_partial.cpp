// Tensor subsets of partial checkpoints and per-tensor bookkeeping shared by the loader,
// the random writer and `inspect`.
#include <algorithm>
#include <charconv>
#include <set>

#include "engine/checkpoint/tensor_spec.h"
#include "engine/util/error.h"

namespace flashdesk {

int64_t TensorSpec::parameters() const {
  if (dtype == DType::F8_E8M0) return 0;       // block scales
  if (dtype == DType::I8) return 2 * numel();  // two E2M1 codes per byte
  return numel();
}

int64_t main_layer_of(std::string_view name) {
  constexpr std::string_view kPrefix = "layers.";
  if (!name.starts_with(kPrefix)) return -1;
  name.remove_prefix(kPrefix.size());
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc() || end == name.data() || end == name.data() + name.size() || *end != '.')
    return -1;
  return layer;
}

std::vector<int64_t> partial_layer_closure(const ModelConfig& config, std::vector<int64_t> layers) {
  const std::vector<LayerRole> roles = derive_layer_roles(config.text);
  std::set<int64_t> closure;
  for (int64_t l : layers) {
    if (l < 0 || l >= config.text.num_hidden_layers)
      throw InvalidRequest("layer " + std::to_string(l) + " does not exist (the model has " +
                           std::to_string(config.text.num_hidden_layers) + " layers)");
    closure.insert(l);
  }
  // Sources of sources are themselves (a source is Full or Reindex over a Full layer), but
  // iterate to a fixed point rather than rely on it.
  for (size_t before = 0; before != closure.size();) {
    before = closure.size();
    for (int64_t l : std::vector<int64_t>(closure.begin(), closure.end()))
      for (int64_t s : {roles[l].kv_source, roles[l].index_source, roles[l].candidate_source})
        if (s >= 0) closure.insert(s);
  }
  return {closure.begin(), closure.end()};
}

std::vector<TensorSpec> expected_partial_tensors(const ModelConfig& config,
                                                 const std::vector<int64_t>& closure) {
  ModelConfig text_only = config;
  text_only.vision.reset();
  std::vector<TensorSpec> all = expected_tensors(text_only);
  std::erase_if(all, [&](const TensorSpec& s) {
    if (s.name.starts_with("mtp.")) return true;
    const int64_t layer = main_layer_of(s.name);
    return layer >= 0 && !std::binary_search(closure.begin(), closure.end(), layer);
  });
  return all;
}

}  // namespace flashdesk
