// One weight of a synthetic checkpoint, with its scale when quantised: generated on first use
// exactly as make-random writes it (random_tensor_writer.h), kept in host memory while any reader
// holds it, freed when the last one releases it. The weight and its scale are one unit because
// the scale is derived from the weight's values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "engine/checkpoint/config.h"
#include "engine/checkpoint/random_tensor_writer.h"

namespace flashdesk {

class SyntheticTensor {
 public:
  // `plan` (and the specs it points to) and `text` must outlive this.
  SyntheticTensor(const RandomTensorPlan& plan, const TextConfig& text, uint64_t seed);

  // The bytes of the weight (scale = false) or of its scale, generated on up to `threads`
  // threads when absent, or written by `draw` where it is set and returns true
  // (Checkpoint::tensor_drawn). Counts one reader until release(). Thread-safe; a second caller
  // waits for the first one's generation rather than repeating it.
  const uint8_t* acquire(bool scale, int threads,
                         const std::function<bool(uint8_t*, uint8_t*)>& draw = {});
  // One reader fewer; the bytes are freed when none is left.
  void release();
  const RandomTensorPlan& plan() const { return plan_; }
  // The bytes held in memory now: the weight's and its scale's, or 0 (reports, tests).
  uint64_t resident_bytes() const;

 private:
  void generate(int threads, const std::function<bool(uint8_t*, uint8_t*)>& draw);

  const RandomTensorPlan plan_;
  const TextConfig& text_;
  const uint64_t seed_;
  mutable std::mutex mutex_;
  std::unique_ptr<uint8_t[]> weight_, scale_;  // null when not resident
  int64_t readers_ = 0;
};

}  // namespace flashdesk
