// The multi-device split described by the sharding table, run in one process (RankGroup): ranks
// in threads, each with its own CPU backend and its slice of the weights (heads, output groups,
// experts), joined by the in-process all-reduce (ThreadCollective). The model code is the
// single-device code; the logits match one device up to the FP32 order of the reductions.
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/ops/cuda/cuda_devices.h"
#include "engine/runtime/rank_group.h"
#include "tests/engine/checkpoint_test_util.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

std::unique_ptr<Backend> cpu_rank(int) {
  return std::make_unique<CpuReferenceBackend>(1);
}

// One device against `ranks` ranks: prefill logits and three greedy decode steps' logits.
void expect_ranks_match_one_device(const std::filesystem::path& dir, int ranks, uint32_t seed) {
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(dir);
  const auto ids = test_prompt(24, ckpt->config().text.vocab_size, seed);
  CpuReferenceBackend one_be(1);
  Model one(ckpt, one_be);
  SequenceState s = one.new_sequence();
  std::vector<std::vector<float>> want = {one.prefill(s, ids, PrefillOptions{})};
  RankGroup group(ckpt, ranks, cpu_rank);
  ASSERT_EQ(group.ranks(), ranks);
  std::vector<std::vector<float>> got = {group.prefill(ids, PrefillOptions{})};
  for (int step = 0; step < 3; ++step) {  // the single device's greedy choice feeds both
    const auto next = static_cast<int32_t>(
        std::max_element(want.back().begin(), want.back().end()) - want.back().begin());
    want.push_back(one.decode(s, next));
    got.push_back(group.decode(next));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    // Partial sums add in another order before the BF16 rounding: about one BF16 ulp of drift
    // per affected value, far below the logits' spread.
    EXPECT_LE(max_abs_diff(got[i], want[i]), 0.02 * max_abs(want[i]))
        << dir.filename() << " ranks " << ranks << " step " << i;
    EXPECT_GT(max_abs(got[i]), 0.0f);
  }
}

// On a GPU: one rank through NCCL (world 1: every FFN's all-reduce runs as ncclAllReduce on the
// backend's stream) gives the single-device model's bits on the same GPU, prefill and decode.
// Skipped without a GPU and on the CPU emulation of the CUDA backend (no NCCL there).
TEST(ShardedModel, OneGpuRankThroughNcclIsTheSingleDevice) {
#ifdef FLASHDESK_CUDA_EMU
  GTEST_SKIP() << "NCCL runs on a GPU; the CPU emulation has none";
#endif
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  std::shared_ptr<const Checkpoint> ckpt =
      Checkpoint::open(std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny");
  const auto ids = test_prompt(24, ckpt->config().text.vocab_size, 13);
  std::unique_ptr<Backend> one_be = make_cuda_backend(0);
  Model one(ckpt, *one_be);
  SequenceState s = one.new_sequence();
  std::vector<float> want = one.prefill(s, ids, PrefillOptions{});
  RankGroup group(
      ckpt, 1, [](int) { return make_cuda_backend(0); }, {}, make_nccl_collectives);
  EXPECT_EQ(group.prefill(ids, PrefillOptions{}), want);
  for (int step = 0; step < 3; ++step) {
    const auto next =
        static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
    want = one.decode(s, next);
    EXPECT_EQ(group.decode(next), want) << "decode step " << step;
  }
}

// On two GPUs (issue 22): the model split over cuda:0 and cuda:1, joined by NCCL, gives the
// greedy ids of one GPU, and logits within the reductions' reordering of them. Skipped with
// fewer than two GPUs and on the CPU emulation (no NCCL there).
void expect_two_gpus_decode_as_one(const std::filesystem::path& dir, uint32_t seed) {
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(dir);
  const auto ids = test_prompt(24, ckpt->config().text.vocab_size, seed);
  std::unique_ptr<Backend> one_be = make_cuda_backend(0);
  Model one(ckpt, *one_be);
  SequenceState s = one.new_sequence();
  std::vector<float> want = one.prefill(s, ids, PrefillOptions{});
  RankGroup group(
      ckpt, 2, [](int r) { return make_cuda_backend(r); }, {}, make_nccl_collectives);
  std::vector<float> got = group.prefill(ids, PrefillOptions{});
  for (int step = 0; step < 8; ++step) {
    EXPECT_LE(max_abs_diff(got, want), 0.02 * max_abs(want)) << dir.filename() << " step " << step;
    const auto next =
        static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
    // The same greedy id, unless one GPU's top two are nearer than the reordering's drift.
    const auto got_id = std::max_element(got.begin(), got.end()) - got.begin();
    if (got_id != next) {
      EXPECT_LE(want[static_cast<size_t>(next)] - want[static_cast<size_t>(got_id)],
                0.02 * max_abs(want))
          << dir.filename() << ": the greedy ids part at step " << step;
    }
    want = one.decode(s, next);
    got = group.decode(next);
  }
}

TEST(ShardedModel, TwoGpusDecodeAsOne) {
#ifdef FLASHDESK_CUDA_EMU
  GTEST_SKIP() << "NCCL runs on a GPU; the CPU emulation has none";
#endif
  if (cuda_devices().size() < 2)
    GTEST_SKIP() << "needs two GPUs; " << cuda_devices().size() << " found";
  expect_two_gpus_decode_as_one(every_role_model_dir(), 31);
  expect_two_gpus_decode_as_one(std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny",
                                32);
}

TEST(ShardedModel, TwoRanksMatchOneDeviceOnTheEveryRoleCheckpoint) {
  expect_ranks_match_one_device(every_role_model_dir(), 2, 11);
}

TEST(ShardedModel, TwoRanksMatchOneDeviceOnFlashTiny) {
  expect_ranks_match_one_device(std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny",
                                2, 12);
}

// Four ranks need o_groups divisible by four (V4.1-Flash has 8): the every-role config with one
// head per output group, as a random checkpoint of its own.
TEST(ShardedModel, FourRanksMatchOneDeviceOnTheEveryRoleRolesWithFourOutputGroups) {
  testing::TempDir dir;
  nlohmann::json config = nlohmann::json::parse(testing::read_text(
      std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/test-every-role.json"));
  nlohmann::json& text = config.contains("text_config") ? config["text_config"] : config;
  ASSERT_EQ(text["num_attention_heads"].get<int>(), 4);
  text["o_groups"] = 4;
  const auto config_path = dir / "every-role-4-groups.json";
  std::ofstream(config_path) << config.dump(2);
  const auto model_dir = dir / "model";
  write_random_checkpoint(config_path, model_dir, testing::random_options(5));
  expect_ranks_match_one_device(model_dir, 4, 13);
  expect_ranks_match_one_device(model_dir, 2, 14);
}

// A batch of three sequences over two ranks, prompts of other lengths, decoded in steps over the
// batch: each sequence's logits are those of the same ranks running it alone (a batched step's
// rows are computed as separate ones, up to the FP32 order of a wider product).
TEST(ShardedModel, TwoRanksDecodeABatchAsEachSequenceAlone) {
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(every_role_model_dir());
  const int64_t V = ckpt->config().text.vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test_prompt(24, V, 21), test_prompt(7, V, 22),
                                                     test_prompt(40, V, 23)};
  RankGroup batch(ckpt, 2, cpu_rank), alone(ckpt, 2, cpu_rank);
  std::vector<std::vector<float>> got = batch.prefill_batch(prompts, PrefillOptions{});
  ASSERT_EQ(batch.sequences(), 3u);
  std::vector<std::vector<std::vector<float>>> want(prompts.size());
  std::vector<std::vector<int32_t>> next(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    want[i].push_back(alone.prefill(prompts[i], PrefillOptions{}));
    EXPECT_LE(max_abs_diff(got[i], want[i].back()), 1e-6 * max_abs(want[i].back())) << i;
    for (int step = 0; step < 3; ++step) {  // the greedy ids of the sequence alone
      const std::vector<float>& l = want[i].back();
      next[i].push_back(static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
      want[i].push_back(alone.decode(next[i].back()));
    }
  }
  for (int step = 0; step < 3; ++step) {
    const std::vector<int32_t> ids = {next[0][step], next[1][step], next[2][step]};
    got = batch.decode_batch(ids);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::vector<float>& w = want[i][static_cast<size_t>(step) + 1];
      EXPECT_LE(max_abs_diff(got[i], w), 1e-6 * max_abs(w)) << "sequence " << i << " step " << step;
      EXPECT_GT(max_abs(got[i]), 0.0f);
    }
  }
  EXPECT_THROW(batch.decode_batch(std::vector<int32_t>{1, 2}), InvalidRequest);
  EXPECT_THROW(batch.decode(1), InvalidRequest);  // a batch, not one sequence
  RankGroup fresh(ckpt, 2, cpu_rank);
  EXPECT_THROW(fresh.decode(1), InvalidRequest);  // nothing prefilled
}

// The small checkpoints have 2 output groups: four ranks are refused with the reason.
TEST(ShardedModel, MoreRanksThanOutputGroupsIsRefusedClearly) {
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(every_role_model_dir());
  try {
    RankGroup group(ckpt, 4, cpu_rank);
    FAIL() << "expected a refusal";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("o_groups must divide over the devices"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace flashdesk::test
