// StepGraphChoice: which way a backend's decode steps run after timing both (no GPU needed: the
// step times are given).
#include "engine/ops/step_graph_choice.h"

#include <gtest/gtest.h>

namespace flashdesk::test {
namespace {

using Way = StepGraphChoice::Way;
constexpr size_t kTrialSteps = StepGraphChoice::kBlocks * StepGraphChoice::kBlockSteps;

// Runs one-row steps until the trial ends, each taking the time `time_of` gives its way and index
// (from 1); returns the ways the steps ran.
template <class TimeOf>
std::vector<Way> run_trial(StepGraphChoice& c, TimeOf time_of) {
  std::vector<Way> ways;
  while (!c.decided() && ways.size() < 1000) {
    const Way w = c.begin_step(1);
    ways.push_back(w);
    c.step_took(time_of(w, ways.size()));
  }
  return ways;
}

TEST(StepGraphChoice, KeepsGraphsWhereTheyAreFaster) {
  StepGraphChoice c;
  const auto ways = run_trial(c, [](Way w, size_t) { return w == Way::Graphs ? 1.0 : 1.3; });
  ASSERT_TRUE(c.decided());
  EXPECT_EQ(c.way(1), Way::Graphs);
  EXPECT_EQ(ways.size(), kTrialSteps);
  // Blocks take turns, launches first.
  EXPECT_EQ(ways[0], Way::Launches);
  EXPECT_EQ(ways[StepGraphChoice::kBlockSteps], Way::Graphs);
  EXPECT_DOUBLE_EQ(c.launches_median(), 1.3);
  EXPECT_DOUBLE_EQ(c.graphs_median(), 1.0);
  EXPECT_EQ(c.begin_step(1), Way::Graphs) << "after the trial, every one-row step";
}

TEST(StepGraphChoice, KeepsLaunchesWhereTheyAreFasterOrTied) {
  StepGraphChoice slower, tied;
  run_trial(slower, [](Way w, size_t) { return w == Way::Graphs ? 1.1 : 1.0; });
  EXPECT_EQ(slower.way(1), Way::Launches);
  // Graphs 2% faster: inside the margin, so the launches stay.
  run_trial(tied, [](Way w, size_t) { return w == Way::Graphs ? 0.98 : 1.0; });
  EXPECT_EQ(tied.way(1), Way::Launches);
}

TEST(StepGraphChoice, LeavesTheWarmUpsAndOutliersOut) {
  StepGraphChoice c;
  constexpr size_t kWarm = 2 * StepGraphChoice::kBlockSteps;
  // Graphs' warm-up block captures (slow), and one later step of each way stalls.
  run_trial(c, [&](Way w, size_t i) {
    if (i <= kWarm && w == Way::Graphs) return 50.0;
    if (i == kWarm + 1 || i == kWarm + StepGraphChoice::kBlockSteps + 1) return 40.0;
    return w == Way::Graphs ? 1.0 : 2.0;
  });
  EXPECT_EQ(c.way(1), Way::Graphs);
  EXPECT_DOUBLE_EQ(c.graphs_median(), 1.0);
  EXPECT_DOUBLE_EQ(c.launches_median(), 2.0);
}

TEST(StepGraphChoice, StepsOfMoreRowsRunAsLaunchesAndAreNotTimed) {
  StepGraphChoice c;
  // A 16-row prompt first, then one-row decodes and five-row verifications taking turns; the
  // verifications' times (which would say graphs) do not count.
  c.begin_step(16);
  EXPECT_FALSE(c.timing());
  c.step_took(0.1);
  size_t steps = 0;
  while (!c.decided() && steps < 1000) {
    const int64_t rows = steps++ % 2 ? 5 : 1;
    const Way w = c.begin_step(rows);
    EXPECT_EQ(c.timing(), rows == 1);
    EXPECT_EQ(StepGraphChoice::tried(rows), rows == 1);
    if (rows == 5) {
      EXPECT_EQ(w, Way::Launches);
    }
    c.step_took(rows == 5 ? 0.1 : (w == Way::Graphs ? 1.2 : 1.0));
  }
  EXPECT_EQ(steps, 2 * kTrialSteps - 1);
  c.begin_step(1);
  EXPECT_FALSE(c.timing());  // decided: no more timing
  EXPECT_EQ(c.way(1), Way::Launches);
  EXPECT_EQ(c.way(5), Way::Launches);
  EXPECT_DOUBLE_EQ(c.launches_median(), 1.0);
}

TEST(StepGraphChoice, GraphsChosenForOneRowStepsOnly) {
  StepGraphChoice c;
  run_trial(c, [](Way w, size_t) { return w == Way::Graphs ? 1.0 : 2.0; });
  EXPECT_EQ(c.way(1), Way::Graphs);
  EXPECT_EQ(c.way(5), Way::Launches);
  EXPECT_EQ(c.begin_step(5), Way::Launches);
}

TEST(StepGraphChoice, ATimeWithNoStepBegunCountsForNothing) {
  StepGraphChoice c;
  c.begin_step(1);
  c.step_took(1.0);
  c.step_took(1.0);  // no step began since the last time: ignored
  const auto ways = run_trial(c, [](Way, size_t) { return 1.0; });
  EXPECT_EQ(ways.size() + 1, kTrialSteps);
}

}  // namespace
}  // namespace flashdesk::test
