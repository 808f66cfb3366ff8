// Progress of a model load: bytes of checkpoint tensors uploaded to the backend so far, out of
// the bytes the text model's weights take, reported after each tensor so a UI can show a
// percentage while a large checkpoint is read (page faults on the mapped shards) and dequantised.
//
// Goals: Qt-free; monotonic; ends with done == total; every shard that holds a loaded tensor is
// reported (one call per tensor, naming it). Non-goals: the Engram tables and the vision tower
// (small, loaded after the weights; the final report comes after them), throttling (the caller's).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint/checkpoint.h"

namespace flashdesk {

struct LoadProgress {
  uint64_t done_bytes = 0;
  uint64_t total_bytes = 0;
  std::string_view tensor;  // the tensor just uploaded; empty on the final report
};

using LoadProgressCallback = std::function<void(const LoadProgress&)>;

class LoadProgressTracker {
 public:
  // The total is the bytes of the tensors under embed., head., norm. and layers.<L>. for every
  // loaded layer L, and mtp. with `dspark` (the draft head is loaded): what load_model_weights
  // reads on a single device. `callback` may be empty.
  LoadProgressTracker(const Checkpoint& checkpoint, const std::vector<LayerRole>& roles,
                      LoadProgressCallback callback, bool dspark = false);

  // `view` was uploaded (in whole or this rank's slice). A tensor read twice (tied embeddings)
  // counts once.
  void uploaded(const TensorView& view);
  // Reports done == total (a sharded rank reads less than the whole; the load is over anyway).
  void finish();

  uint64_t total_bytes() const { return total_; }

 private:
  LoadProgressCallback callback_;
  std::set<std::string, std::less<>> counted_;
  uint64_t done_ = 0;
  uint64_t total_ = 0;
};

}  // namespace flashdesk
