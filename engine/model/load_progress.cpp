// Counts uploaded weight bytes against the bytes of the text model's tensors.
#include "engine/model/load_progress.h"

#include <algorithm>

namespace flashdesk {

namespace {

// True for the tensors load_model_weights reads: the embedding, head and final norm, and the
// tensors of the loaded layers and, when the draft head is loaded, its mtp.* (never vision ones).
bool is_loaded_tensor(std::string_view name, const std::set<std::string, std::less<>>& layers,
                      bool dspark) {
  for (std::string_view prefix : {"embed.", "head.", "norm."})
    if (name.starts_with(prefix)) return true;
  if (dspark && name.starts_with("mtp.")) return true;
  if (!name.starts_with("layers.")) return false;
  const size_t end = name.find('.', 7);
  return end != std::string_view::npos && layers.contains(name.substr(0, end + 1));
}

}  // namespace

LoadProgressTracker::LoadProgressTracker(const Checkpoint& checkpoint,
                                         const std::vector<LayerRole>& roles,
                                         LoadProgressCallback callback, bool dspark)
    : callback_(std::move(callback)) {
  std::set<std::string, std::less<>> layers;
  for (const LayerRole& role : roles) layers.insert("layers." + std::to_string(role.layer) + ".");
  for (const std::string& name : checkpoint.tensor_names())
    if (is_loaded_tensor(name, layers, dspark)) total_ += checkpoint.tensor_spec(name).nbytes();
}

void LoadProgressTracker::uploaded(const TensorView& view) {
  if (!counted_.emplace(view.name).second) return;
  done_ = std::min(total_, done_ + view.nbytes);
  if (callback_) callback_(LoadProgress{done_, total_, view.name});
}

void LoadProgressTracker::finish() {
  done_ = total_;
  if (callback_) callback_(LoadProgress{done_, total_, {}});
}

}  // namespace flashdesk
