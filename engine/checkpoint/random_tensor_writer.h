// Generates one random tensor (with its scale, for quantised weights) in row chunks and writes
// the bytes to a TensorSink (a safetensors file for make-random, memory for a synthetic
// checkpoint); the chunks are independent jobs for a thread pool.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/checkpoint/tensor_sink.h"
#include "engine/checkpoint/tensor_spec.h"

namespace flashdesk {

// A weight as the model sees it, plus how it is stored.
struct RandomTensorPlan {
  enum class Format { Plain, Fp8Tiles, Fp8Rows, Fp4Rows };
  const TensorSpec* weight = nullptr;
  const TensorSpec* scale = nullptr;  // F8_E8M0 sibling of FP8 / FP4 weights
  Format format = Format::Plain;
  int64_t rows = 0, cols = 0;  // logical [rows, cols] (packed FP4: cols = 2 x bytes)
};

// The storage format's name for reports: "fp4 rows (experts)", "fp8 32x32 tiles", "fp8 rows
// (Engram)", or a plain tensor's dtype.
std::string random_format_name(RandomTensorPlan::Format format, DType dtype);

// Pairs each ".weight" with its ".scale" and classifies the storage format.
std::vector<RandomTensorPlan> plan_random_tensors(const std::vector<TensorSpec>& specs);

// Values a generation job draws: large enough that a job outweighs its scheduling, small enough
// that a tensor spreads over every thread. Any size gives the same bytes (rows are independent).
inline constexpr int64_t kRandomElementsPerJob = int64_t{1} << 20;

// Splits a tensor into row-chunk jobs of about `elements_per_job` values each; each job writes
// its rows of the weight (and of its scale) to `sink`, which must outlive the jobs.
void add_random_tensor_jobs(const RandomTensorPlan& plan, const TextConfig& text, uint64_t seed,
                            TensorSink& sink, int64_t elements_per_job,
                            std::vector<std::function<void()>>& jobs);

// Rows [r0, r1) of `plan`'s weight and of its scale, as the jobs above write them, into `weight`
// and `scale` from their first byte (FP8 tiles: r0 a multiple of 32, and r1 too unless it is the
// last row): what a device drawing a weight itself asks the host for where it cannot vouch for
// its own values (random_recipe.h).
void write_random_rows(const RandomTensorPlan& plan, const TextConfig& text, uint64_t seed,
                       int64_t r0, int64_t r1, uint8_t* weight, uint8_t* scale);

// Runs jobs on up to `threads` threads (the calling thread included, no more threads than jobs);
// rethrows the first error.
void run_jobs(std::vector<std::function<void()>>& jobs, int threads);

}  // namespace flashdesk
