// Step graphs on the CUDA backend (engine/ops/cuda/step_graph.h): decode steps run as CUDA graphs
// give the logits of the same steps launched kernel by kernel, to the bit (the same kernels on
// the same inputs), whether a step replays a recorded graph (its per-step values in device
// memory) or is captured, also where a host read cuts a step into several graphs (routed experts
// in host memory) or the step is launched in parts of a layer; most steps and parts replay; the
// fused ops give the logits of their separate kernels within the goldens' bound, the indexer
// beside the query gives those of the in-place order, and the cache rows' norm, RoPE and
// quantisation in one kernel those of the three. Skipped without a
// CUDA device (the cuda-emu build runs it on the emulation, whose graphs run their captured work
// when launched, as on the device).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "engine/ops/cuda/cuda_devices.h"
#include "tests/engine/golden_test_util.h"
#include "tests/engine/model_test_util.h"
#ifdef FLASHDESK_HAVE_CUDA
#include "engine/ops/cuda/cuda_backend.h"
#endif

namespace flashdesk::test {
namespace {

#ifdef FLASHDESK_HAVE_CUDA
constexpr int kSteps = 10;

// Prefill (longer than a graph step) then kSteps decode steps of fixed tokens; every step's
// logits.
std::vector<std::vector<float>> run_steps(CudaBackend& be, bool graphs, int64_t host_from) {
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(every_role_model_dir());
  const auto ids = test_prompt(80 + kSteps, ckpt->config().text.vocab_size, 5);
  be.set_step_graphs(graphs);
  ModelOptions o;
  o.host_experts_from_layer = host_from;
  Model m(ckpt, be, o);
  SequenceState s = m.new_sequence();
  std::vector<std::vector<float>> out;
  out.push_back(m.prefill(s, std::span(ids).first(80), PrefillOptions{}));
  for (int i = 0; i < kSteps; ++i) out.push_back(m.decode(s, ids[80 + i]));
  return out;
}

void print_counts(const cuda::StepGraphCounts& c) {
  std::printf(
      "[ measure  ] step graphs: %llu launched, %llu instantiated, %llu updated, %llu "
      "replayed, %llu replays stopped (the last at %s)\n",
      static_cast<unsigned long long>(c.launches),
      static_cast<unsigned long long>(c.instantiations), static_cast<unsigned long long>(c.updates),
      static_cast<unsigned long long>(c.replays), static_cast<unsigned long long>(c.replay_stops),
      c.last_stop);
}

void expect_same_bits(const std::vector<std::vector<float>>& a,
                      const std::vector<std::vector<float>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << "step " << i;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0)
        << "step " << i << ": logits differ (max diff " << max_abs_diff(a[i], b[i]) << ")";
  }
}
#endif

TEST(StepGraphs, DecodeStepsGiveTheLogitsOfPlainLaunches) {
#ifndef FLASHDESK_HAVE_CUDA
  GTEST_SKIP() << cuda_unavailable_reason();
#else
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  CudaBackend plain(0), graphed(0), captured(0);
  captured.set_step_replay(false);
  // Whole steps, whatever FLASHDESK_CUDA_GRAPH_PART_LAYERS says (the GPU script runs the test
  // file under several).
  graphed.set_step_graph_part_layers(0);
  captured.set_step_graph_part_layers(0);
  const auto want = run_steps(plain, false, -1);
  const auto got = run_steps(graphed, true, -1);
  expect_same_bits(want, got);
  expect_same_bits(want, run_steps(captured, true, -1));
  EXPECT_EQ(plain.step_graph_counts().launches, 0u);
  EXPECT_EQ(captured.step_graph_counts().replays, 0u);
  const cuda::StepGraphCounts& c = graphed.step_graph_counts();
  print_counts(c);
  // One graph a decode step (the prefill's 80 rows are past the graph limit).
  EXPECT_EQ(c.launches, static_cast<uint64_t>(kSteps));
  // Most steps issue the recorded ops (positions, ring slots, pending rows and entry counts are
  // device values), so they replay; the others reuse an executable graph where they can: the
  // compressors of the every-role model run every few steps, so a handful of topologies.
  EXPECT_GE(c.replays, static_cast<uint64_t>(kSteps) / 2);
  EXPECT_LT(c.instantiations, static_cast<uint64_t>(kSteps) / 2);
  EXPECT_EQ(c.updates + c.instantiations + c.replays, c.launches);
  const cuda::StepGraphCounts& cc = captured.step_graph_counts();
  EXPECT_GT(cc.updates, 0u);
  EXPECT_EQ(cc.updates + cc.instantiations, cc.launches);
#endif
}

// The unobserved steps take the fused ops (one kernel for a sublayer boundary's expansion,
// collapse and norm, the experts' sums rounded where made, the attention's RoPE undone where its
// output is written): the logits of their separate kernels within the goldens' logits bound (the
// norms' squares are summed in another order), and every step's argmax the same.
TEST(StepGraphs, FusedOpsGiveTheLogitsOfTheSeparateKernels) {
#ifndef FLASHDESK_HAVE_CUDA
  GTEST_SKIP() << cuda_unavailable_reason();
#else
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  CudaBackend fused(0), separate(0);
  separate.set_fused_ops(false);
  const auto want = run_steps(separate, false, -1);
  const auto got = run_steps(fused, false, -1);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_LE(relative_rms(want[i], got[i]), 1e-2) << "step " << i;
    EXPECT_EQ(std::max_element(want[i].begin(), want[i].end()) - want[i].begin(),
              std::max_element(got[i].begin(), got[i].end()) - got[i].begin())
        << "step " << i;
  }
#endif
}

// A cache row's norm, RoPE and quantisation in one kernel (set_fused_cache_rows: the window's
// key/value row, a compressed entry and its index key) give the three kernels' bits, so the
// logits to the bit, launched and as step graphs (where a compressed entry's row is a value in
// device memory).
TEST(StepGraphs, FusedCacheRowsGiveTheLogitsOfTheThreeKernels) {
#ifndef FLASHDESK_HAVE_CUDA
  GTEST_SKIP() << cuda_unavailable_reason();
#else
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  CudaBackend three(0), one(0), graphed(0);
  three.set_fused_cache_rows(false);
  one.set_fused_cache_rows(true);
  graphed.set_fused_cache_rows(true);
  graphed.set_step_graph_part_layers(0);
  const auto want = run_steps(three, false, -1);
  expect_same_bits(want, run_steps(one, false, -1));
  expect_same_bits(want, run_steps(graphed, true, -1));
#endif
}

// The compressor and the indexer beside the query's projections (set_indexer_beside_query): the
// same kernels on the same inputs on another stream, so the logits of the in-place order to the
// bit, launched or as step graphs (whose capture forks and joins the extra section).
TEST(StepGraphs, IndexerBesideTheQueryGivesTheLogitsOfInPlace) {
#ifndef FLASHDESK_HAVE_CUDA
  GTEST_SKIP() << cuda_unavailable_reason();
#else
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  CudaBackend in_place(0), beside(0), graphed(0);
  in_place.set_indexer_beside_query(false);
  beside.set_indexer_beside_query(true);
  graphed.set_indexer_beside_query(true);
  graphed.set_step_graph_part_layers(0);
  EXPECT_TRUE(beside.indexer_beside_query(1));
  EXPECT_FALSE(beside.indexer_beside_query(80));  // a prefill's rows fill the GPU themselves
  const auto want = run_steps(in_place, false, -1);
  expect_same_bits(want, run_steps(beside, false, -1));
  expect_same_bits(want, run_steps(graphed, true, -1));
#endif
}

// Parts of one layer each (set_step_graph_part_layers): every part launched as its own graph, so
// the device runs a layer while the host replays the next; the logits of plain launches to the bit,
// and most parts replay (a stop captures one layer, not the rest of the step).
TEST(StepGraphs, PartsOfOneLayerGiveTheLogitsOfPlainLaunches) {
#ifndef FLASHDESK_HAVE_CUDA
  GTEST_SKIP() << cuda_unavailable_reason();
#else
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  CudaBackend plain(0), parted(0);
  parted.set_step_graph_part_layers(1);
  const auto want = run_steps(plain, false, -1);
  const auto got = run_steps(parted, true, -1);
  expect_same_bits(want, got);
  const cuda::StepGraphCounts& c = parted.step_graph_counts();
  print_counts(c);
  const int64_t layers = Checkpoint::open(every_role_model_dir())->config().text.num_hidden_layers;
  // A part a layer, and one for the logits.
  EXPECT_EQ(c.launches, static_cast<uint64_t>(kSteps * (layers + 1)));
  EXPECT_GE(c.replays, c.launches / 2);
  EXPECT_EQ(c.updates + c.instantiations + c.replays, c.launches);
#endif
}

TEST(StepGraphs, HostReadsInsideAStepCutItIntoGraphs) {
#ifndef FLASHDESK_HAVE_CUDA
  GTEST_SKIP() << cuda_unavailable_reason();
#else
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  // Routed experts of layers 1 on in host memory: each such layer reads its input back.
  CudaBackend plain(0), graphed(0);
  const auto want = run_steps(plain, false, 1);
  const auto got = run_steps(graphed, true, 1);
  expect_same_bits(want, got);
  EXPECT_GT(graphed.host_moe_calls(), 0u);
  const cuda::StepGraphCounts& c = graphed.step_graph_counts();
  print_counts(c);
  EXPECT_GT(c.launches, 2u * kSteps) << "each step cut at its host reads";
  // Each part stages its uploads and takes its pool blocks as if it were a step of its own, so
  // parts replay whatever the routing before them was.
  EXPECT_GE(c.replays, c.launches / 2);
  EXPECT_EQ(c.updates + c.instantiations + c.replays, c.launches);
#endif
}

}  // namespace
}  // namespace flashdesk::test
