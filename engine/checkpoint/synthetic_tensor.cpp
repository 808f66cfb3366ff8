// Generating a synthetic weight into memory through the random tensor writer's jobs.
#include "engine/checkpoint/synthetic_tensor.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

// A weight's and its scale's buffers as a TensorSink: the writer's row chunks land at their
// offsets; the byte counts let generate() check that every byte was written.
class MemorySink final : public TensorSink {
 public:
  struct Target {
    const TensorSpec* spec = nullptr;
    uint8_t* data = nullptr;
    std::atomic<uint64_t> written{0};
  };

  MemorySink(const TensorSpec* weight, uint8_t* weight_data, const TensorSpec* scale,
             uint8_t* scale_data) {
    targets_[0].spec = weight;
    targets_[0].data = weight_data;
    targets_[1].spec = scale;
    targets_[1].data = scale_data;
  }

  void write(std::string_view name, std::span<const uint8_t> bytes, uint64_t offset) override {
    Target& t = target(name);
    FD_CHECK(offset + bytes.size() <= t.spec->nbytes(),
             "write past the end of tensor " + t.spec->name);
    if (!bytes.empty()) std::memcpy(t.data + offset, bytes.data(), bytes.size());
    t.written += bytes.size();
  }

  void check_complete() const {
    for (const Target& t : targets_)
      if (t.spec)
        FD_CHECK(t.written == t.spec->nbytes(),
                 "synthetic tensor " + t.spec->name + ": " + std::to_string(t.written.load()) +
                     " of " + std::to_string(t.spec->nbytes()) + " bytes generated");
  }

 private:
  Target& target(std::string_view name) {
    for (Target& t : targets_)
      if (t.spec && t.spec->name == name) return t;
    FD_CHECK(false, "the generator wrote tensor " + std::string(name) + ", not " +
                        targets_[0].spec->name + " or its scale");
    return targets_[0];
  }

  Target targets_[2];
};

}  // namespace

SyntheticTensor::SyntheticTensor(const RandomTensorPlan& plan, const TextConfig& text,
                                 uint64_t seed)
    : plan_(plan), text_(text), seed_(seed) {}

const uint8_t* SyntheticTensor::acquire(bool scale, int threads,
                                        const std::function<bool(uint8_t*, uint8_t*)>& draw) {
  FD_CHECK(!scale || plan_.scale, plan_.weight->name + " has no scale");
  const std::lock_guard lock(mutex_);
  if (!weight_) generate(threads, draw);
  ++readers_;
  return scale ? scale_.get() : weight_.get();
}

void SyntheticTensor::release() {
  const std::lock_guard lock(mutex_);
  FD_CHECK(readers_ > 0,
           "synthetic tensor " + plan_.weight->name + " released more often than it was read");
  if (--readers_ > 0) return;
  weight_.reset();
  scale_.reset();
}

uint64_t SyntheticTensor::resident_bytes() const {
  const std::lock_guard lock(mutex_);
  if (!weight_) return 0;
  return plan_.weight->nbytes() + (plan_.scale ? plan_.scale->nbytes() : 0);
}

// Called with mutex_ held: other threads wanting this tensor wait, others generate theirs.
void SyntheticTensor::generate(int threads, const std::function<bool(uint8_t*, uint8_t*)>& draw) {
  auto weight = std::make_unique_for_overwrite<uint8_t[]>(plan_.weight->nbytes());
  std::unique_ptr<uint8_t[]> scale;
  if (plan_.scale) scale = std::make_unique_for_overwrite<uint8_t[]>(plan_.scale->nbytes());
  if (draw && draw(weight.get(), scale.get())) {  // a backend drew them (on its GPU)
    weight_ = std::move(weight);
    scale_ = std::move(scale);
    return;
  }
  MemorySink sink(plan_.weight, weight.get(), plan_.scale, scale.get());
  std::vector<std::function<void()>> jobs;
  add_random_tensor_jobs(plan_, text_, seed_, sink, kRandomElementsPerJob, jobs);
  run_jobs(jobs, threads);
  sink.check_complete();
  weight_ = std::move(weight);
  scale_ = std::move(scale);
}

}  // namespace flashdesk
