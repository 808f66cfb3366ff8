// Greedy and nucleus sampling over FP32 logits.
#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

// splitmix64: a tiny, well-mixed generator whose sequence is fixed by the seed on every platform.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || temperature > 100.0f)
    throw InvalidRequest("temperature must be between 0 and 100, got " +
                         std::to_string(temperature));
  if (!(top_p > 0.0f) || top_p > 1.0f)
    throw InvalidRequest("top_p must be in (0, 1], got " + std::to_string(top_p));
}

int64_t argmax(std::span<const float> values) {
  int64_t best = -1;
  float best_value = 0.0f;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) continue;
    if (best < 0 || values[i] > best_value) {
      best = static_cast<int64_t>(i);
      best_value = values[i];
    }
  }
  return best < 0 ? 0 : best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), state_(params.seed) {
  params_.validate();
}

double Sampler::next_uniform() {
  return static_cast<double>(splitmix64(state_) >> 11) * 0x1.0p-53;
}

size_t Sampler::nucleus(std::span<const float> logits, double& kept_mass, bool ordered) {
  // Softmax at the temperature, in double so that tiny probabilities still order correctly.
  const float max_logit = logits[argmax(logits)];
  scratch_.clear();
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double p = std::exp((static_cast<double>(logits[i]) - max_logit) / params_.temperature);
    if (p > 0.0) {
      scratch_.emplace_back(static_cast<float>(p), static_cast<int64_t>(i));
      total += p;
    }
  }
  // Most likely first; equal probabilities keep id order so the result never depends on sort.
  const auto first = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  size_t keep = scratch_.size();
  if (params_.top_p < 1.0f) {
    // The nucleus is usually a small part of the vocabulary: order only as far as it reaches,
    // in growing steps (the order is total, so each step's prefix is the full sort's). A broad
    // nucleus (half the rest or more) sorts the rest at once: a heap select that large is slower.
    double mass = 0.0;
    size_t sorted = 0;
    for (size_t i = 0; i < scratch_.size(); ++i) {
      if (i == sorted) {
        const auto from = scratch_.begin() + static_cast<std::ptrdiff_t>(i);
        sorted = std::max<size_t>(64, 4 * sorted);
        if (2 * sorted >= scratch_.size()) {
          std::sort(from, scratch_.end(), first);
          sorted = scratch_.size();
        } else {
          std::partial_sort(from, scratch_.begin() + static_cast<std::ptrdiff_t>(sorted),
                            scratch_.end(), first);
        }
      }
      mass += scratch_[i].first / total;
      if (mass >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  } else if (ordered) {
    std::sort(scratch_.begin(), scratch_.end(), first);
  }
  kept_mass = 0.0;
  for (size_t i = 0; i < keep; ++i) kept_mass += scratch_[i].first;
  return keep;
}

int64_t Sampler::sample(std::span<const float> logits) {
  FD_CHECK(!logits.empty(), "sampling needs at least one logit");
  if (params_.temperature == 0.0f) return argmax(logits);
  double kept_mass = 0.0;
  const size_t keep = nucleus(logits, kept_mass, true);
  const double target = next_uniform() * kept_mass;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += scratch_[i].first;
    if (target < acc) return scratch_[i].second;
  }
  return scratch_[keep - 1].second;
}

std::vector<double> Sampler::distribution(std::span<const float> logits) {
  FD_CHECK(!logits.empty(), "a distribution needs at least one logit");
  std::vector<double> p(logits.size(), 0.0);
  if (params_.temperature == 0.0f) {
    p[static_cast<size_t>(argmax(logits))] = 1.0;
    return p;
  }
  double kept_mass = 0.0;
  const size_t keep = nucleus(logits, kept_mass, false);  // a density needs no order
  for (size_t i = 0; i < keep; ++i)
    p[static_cast<size_t>(scratch_[i].second)] = scratch_[i].first / kept_mass;
  return p;
}

int64_t Sampler::draw(std::span<const double> probabilities) {
  FD_CHECK(!probabilities.empty(), "drawing needs at least one probability");
  double total = 0.0;
  for (double p : probabilities) total += p;
  FD_CHECK(total > 0.0, "drawing needs some probability mass");
  const double target = next_uniform() * total;
  double acc = 0.0;
  int64_t last = -1;
  for (size_t i = 0; i < probabilities.size(); ++i) {
    if (!(probabilities[i] > 0.0)) continue;
    acc += probabilities[i];
    last = static_cast<int64_t>(i);
    if (target < acc) return last;
  }
  return last;  // rounding left the target at the very end: the last id with mass
}

}  // namespace flashdesk
