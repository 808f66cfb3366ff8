// The loader at full size without full-size weights: `make-random --skeleton` writes the real
// V4.1-Flash layout (96,085 tensors in ~10 GiB sparse shards, megabytes on disk), and `inspect`
// opens and validates every header and tensor of it in another process.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>

#include "engine/checkpoint/checkpoint.h"
#include "tests/engine/checkpoint_test_util.h"
#include "tests/integration/cli_runner.h"

namespace flashdesk {
namespace {

uint64_t allocated_bytes(const std::filesystem::path& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

TEST(FullSizeSkeleton, OpensAndValidatesTheWholeLayout) {
  testing::TempDir dir;
  const std::string config = testing::config_asset("deepseek-v4.1-flash.json").string();
  const auto w = testing::run_cli("make-random --skeleton --config " + config + " --out " +
                                  dir.path().string() + " --shard-mb 10240");
  ASSERT_EQ(w.exit_code, 0) << w.output;
  size_t shards = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    shards += e.path().filename().string().starts_with("model-") ? 1 : 0;
  EXPECT_GE(shards, 30u);  // 10 GiB shards; each ~98 GiB Engram table gets shards of its own
  EXPECT_LT(allocated_bytes(dir.path()), uint64_t{256} << 20);  // holes, not 475 GiB

  const auto start = std::chrono::steady_clock::now();
  const auto ckpt = Checkpoint::open(dir.path());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(ckpt->tensor_names().size(), 96085u);
  EXPECT_EQ(ckpt->files().size(), shards + 1);  // + the Engram map
  EXPECT_EQ(ckpt->tensor("layers.14.engram.embed.weight").dim(0), 384016682);
  EXPECT_EQ(ckpt->engram_token_map().size(), 129280u);
  std::printf("Checkpoint::open of the full-size layout: %.2f s\n", seconds);

  const auto r = testing::run_cli("inspect " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoint: 96085 tensors in " + std::to_string(shards + 1) +
                          " files, valid; fingerprint " + ckpt->fingerprint()),
            std::string::npos)
      << r.output;

  // A partial full-size checkpoint of one layer (what GPU benchmarks load).
  testing::TempDir one;
  ASSERT_EQ(testing::run_cli("make-random --skeleton --config " + config + " --out " +
                             one.path().string() + " --layers 24")
                .exit_code,
            0);
  const auto partial = Checkpoint::open(one.path(), {.allow_partial = true});
  EXPECT_EQ(partial->partial_layers(), (std::vector<int64_t>{20, 24}));
  EXPECT_TRUE(partial->has("layers.24.ffn.experts.383.w2.scale"));
  EXPECT_TRUE(partial->has("layers.20.attn.compressor.wkv.weight"));
  EXPECT_FALSE(partial->has("layers.14.engram.embed.weight"));
}

}  // namespace
}  // namespace flashdesk
