// Collectives between the devices of one model split (multi-GPU tensor/expert parallelism).
// A single device needs none: SingleDevice is the identity.
#pragma once

#include <cstdint>

#include "engine/ops/tensor.h"

namespace flashdesk {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // In place: every rank ends with the element-wise FP32 sum over ranks (F32 tensors only).
  virtual void all_reduce_sum(Tensor& t) = 0;
};

class SingleDevice final : public Collective {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  void all_reduce_sum(Tensor&) override {}
};

}  // namespace flashdesk
