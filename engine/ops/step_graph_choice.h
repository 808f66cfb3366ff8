// Whether a backend's decode steps run faster as step graphs or as plain launches, decided by
// timing steps both ways where it runs (the CUDA backend's FLASHDESK_CUDA_GRAPH=auto, its
// default). Graphs pay where the host takes longer to launch a layer's kernels than the device
// takes to run them (a small model, a slow host): on the H200, flash-tiny's window-only layers ran
// 1.4x faster as graphs of a layer each, while at V4.1-Flash's shapes the device bounds a step and
// plain launches were 7-20% faster (docs/cuda-backend.md). The host CPU, the GPU, the model and
// the step's size decide, so the choice is measured, not assumed.
//
// One-row steps (decode) are tried: blocks of kBlockSteps timed steps, launches and graphs taking
// turns, kBlocks in all; each way's first block is its warm-up (graphs are captured there) and is
// not counted. Graphs are kept where their median step is at least kMargin faster: at a tie the
// launches need no captured graphs. Steps of more rows (DSpark's verifications, prompts of up to
// 64 tokens) run as launches: as graphs flash-tiny's DSpark decoding ran 925 against 1253 tokens/s
// (their host reads cut each verification into parts, and their row counts vary), and trying
// each row count cost a first answer 16% (docs/cuda-backend.md).
#pragma once

#include <cstdint>
#include <vector>

namespace flashdesk {

class StepGraphChoice {
 public:
  enum class Way { Launches, Graphs };
  static constexpr int kBlockSteps = 4, kBlocks = 6;
  static constexpr double kMargin = 0.03;

  // The way the step about to begin runs; `rows`: its rows.
  Way begin_step(int64_t rows);
  // The step begun last took `seconds`, from its beginning to its result on the host.
  void step_took(double seconds);

  // Whether steps of `rows` rows are tried (else they run as launches).
  static bool tried(int64_t rows) { return rows == 1; }
  // Whether the step begun last is one the trial times.
  bool timing() const { return pending_; }

  // Whether the one-row steps' trial ended, the way steps of `rows` rows run now, and the medians
  // the trial compared (seconds; 0 until decided).
  bool decided() const { return decided_; }
  Way way(int64_t rows) const;
  double launches_median() const { return medians_[0]; }
  double graphs_median() const { return medians_[1]; }

 private:
  Way trial_way() const;

  bool pending_ = false;  // the step begun last is a one-row step to time
  int block_ = 0, timed_in_block_ = 0;
  std::vector<double> samples_[2];  // [Launches, Graphs]: seconds a step, warm-ups left out
  bool decided_ = false;
  Way chosen_ = Way::Launches;
  double medians_[2] = {0, 0};
};

}  // namespace flashdesk
