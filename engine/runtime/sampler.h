// Picks the next token from FP32 logits: greedy, or temperature + top-p sampling with a seeded
// generator, so a (prompt, seed) pair always gives the same answer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace flashdesk {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // nucleus: smallest set of most likely tokens with mass >= top_p
  uint64_t seed = 0;

  // Throws InvalidRequest naming the field when a value is out of range.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  int64_t sample(std::span<const float> logits);
  const SamplingParams& params() const { return params_; }

  // The distribution sample() draws from, dense over the logits' ids: softmax at the temperature,
  // cut to the top-p nucleus and renormalised (temperature 0: all mass on the argmax).
  // Speculative sampling compares the target's and the draft's (speculative_sampling.h).
  std::vector<double> distribution(std::span<const float> logits);
  // One id drawn from `probabilities` (non-negative, summing to about 1); never an id of mass 0.
  int64_t draw(std::span<const double> probabilities);
  double uniform() { return next_uniform(); }  // in [0, 1), from the seeded sequence

 private:
  double next_uniform();  // in [0, 1)
  // Fills scratch_ with (unnormalised probability, id) and returns how many of them form the
  // top-p nucleus, which comes first, most likely first; `kept_mass` is their sum. Without top-p
  // the nucleus is everything, ordered only when `ordered` asks for it.
  size_t nucleus(std::span<const float> logits, double& kept_mass, bool ordered);

  SamplingParams params_;
  uint64_t state_;
  std::vector<std::pair<float, int64_t>> scratch_;  // (probability, id), reused across calls
};

// Index of the largest value; the lowest index wins ties. NaN never wins.
int64_t argmax(std::span<const float> values);

}  // namespace flashdesk
