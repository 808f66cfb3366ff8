// `flashdesk-cli inspect` and `make-random` run as a user would: the full-size config's role
// table and KV bytes, and a random checkpoint validated and fingerprinted by separate processes.
#include <gtest/gtest.h>

#include <sstream>

#include "tests/engine/checkpoint_test_util.h"
#include "tests/integration/cli_runner.h"

namespace flashdesk {
namespace {

using testing::run_cli;

std::string asset(const std::string& name) {
  return testing::config_asset(name).string();
}

// The role-table row of `layer`: {ratio, role, kv_src, idx_src, cand_src, engram, part}.
std::vector<std::string> role_row(const std::string& output, int layer) {
  std::istringstream in(output);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.starts_with("layer ")) in_table = true;
    if (!in_table) continue;
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.size() == 8 && f[0] == std::to_string(layer)) return {f.begin() + 1, f.end()};
  }
  return {};
}

TEST(InspectCli, FullSizeConfigRolesAndKvBytes) {
  const auto r = run_cli("inspect " + asset("deepseek-v4.1-flash.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layers: 40 main + 3 DSpark stages"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("persisted global KV: 890 B/token"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("encoder 534, decoder 356"), std::string::npos);
  EXPECT_NE(r.output.find("CED: encoder layers 0-19, decoder layers 20-39"), std::string::npos);
  // docs/model-spec.md §1.2's table.
  using Row = std::vector<std::string>;
  EXPECT_EQ(role_row(r.output, 0), (Row{"0", "window-only", "-", "-", "-", "-", "encoder"}));
  EXPECT_EQ(role_row(r.output, 1), (Row{"0", "window-only", "-", "-", "-", "yes", "encoder"}));
  for (int full : {2, 8, 14})
    EXPECT_EQ(role_row(r.output, full),
              (Row{"2", "Full", std::to_string(full), std::to_string(full), "-",
                   full == 14 ? "yes" : "-", "encoder"}));
  for (int reuse : {3, 7, 9, 13, 15, 19}) {
    const std::string src = std::to_string(2 + (reuse - 2) / 6 * 6);
    EXPECT_EQ(role_row(r.output, reuse), (Row{"2", "Reuse", src, src, "-", "-", "encoder"}));
  }
  EXPECT_EQ(role_row(r.output, 20), (Row{"1", "Full+cand", "20", "20", "-", "-", "decoder"}));
  for (int reindex : {24, 28, 32, 36})
    EXPECT_EQ(role_row(r.output, reindex),
              (Row{"1", "Reindex", "20", std::to_string(reindex), "20", "-", "decoder"}));
  for (int reuse : {21, 23, 25, 31, 37, 39}) {
    const std::string idx = std::to_string(20 + (reuse - 20) / 4 * 4);
    EXPECT_EQ(role_row(r.output, reuse), (Row{"1", "Reuse", "20", idx, "-", "-", "decoder"}));
  }
  EXPECT_TRUE(role_row(r.output, 40).empty());  // DSpark stages are not main layers
  EXPECT_NE(r.output.find("checkpoint: no weights"), std::string::npos);
}

// --plan from the config alone, for a machine the options describe; bad values are messages.
TEST(InspectCli, PlanForAMachineTheOptionsDescribe) {
  const auto r = run_cli("inspect " + asset("deepseek-v4.1-flash.json") +
                         " --plan --devices 1 --gpu-mem 141 --host-mem 512");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("on 1 GPU(s) of 141 GiB + 512 GiB host memory"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("| routed experts, layers 0-"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| host RAM | CPU computes |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens/s"), std::string::npos) << r.output;
  const auto bad =
      run_cli("inspect " + asset("deepseek-v4.1-flash.json") + " --plan --devices two");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--devices: expected auto or a GPU count"), std::string::npos)
      << bad.output;
}

TEST(InspectCli, DirectoryWithOnlyAConfig) {
  testing::TempDir dir;
  testing::write_text(dir / "config.json", testing::read_text(asset("test-every-role.json")));
  const auto r = run_cli("inspect " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layers: 14 main"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("persisted global KV: 212 B/token"), std::string::npos) << r.output;
}

std::string fingerprint_of(const std::string& output) {
  const std::string key = "fingerprint ";
  const size_t at = output.find(key);
  return at == std::string::npos ? "" : output.substr(at + key.size(), 64);
}

TEST(MakeRandomCli, WritesAValidCheckpointWithAStableFingerprint) {
  testing::TempDir a, b;
  for (const auto* dir : {&a, &b}) {
    const auto w = run_cli("make-random --config " + asset("test-every-role.json") + " --out " +
                           dir->path().string() + " --seed 77 --shard-mb 4");
    ASSERT_EQ(w.exit_code, 0) << w.output;
    EXPECT_NE(w.output.find("model-00001-of-"), std::string::npos) << w.output;
  }
  const auto r1 = run_cli("inspect " + a.path().string());
  const auto r2 = run_cli("inspect " + b.path().string());
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_NE(r1.output.find("valid; fingerprint"), std::string::npos) << r1.output;
  EXPECT_NE(r1.output.find("weights digest: "), std::string::npos) << r1.output;
  const std::string fp = fingerprint_of(r1.output);
  EXPECT_EQ(fp.size(), 64u);
  EXPECT_EQ(fingerprint_of(r2.output), fp);  // other process, other directory, same bytes
}

TEST(MakeRandomCli, PartialCheckpoint) {
  testing::TempDir dir;
  const auto w = run_cli("make-random --config " + asset("test-every-role.json") + " --out " +
                         dir.path().string() + " --layers 12");
  ASSERT_EQ(w.exit_code, 0) << w.output;
  EXPECT_NE(w.output.find("partial checkpoint: layers 8,12"), std::string::npos) << w.output;
  const auto refused = run_cli("inspect " + dir.path().string());
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("allow_partial"), std::string::npos) << refused.output;
  const auto ok = run_cli("inspect --allow-partial " + dir.path().string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("partial: holds layers 8, 12 only"), std::string::npos) << ok.output;
}

TEST(CliErrors, BadInputIsAMessageNotACrash) {
  testing::TempDir dir;
  testing::write_text(dir / "config.json", R"({"text_config": {"hidden_size": "wide"}})");
  auto r = run_cli("inspect " + (dir / "config.json").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("config.json: text_config.hidden_size: expected an integer"),
            std::string::npos)
      << r.output;
  r = run_cli("make-random --config " + asset("test-every-role.json") + " --out " +
              dir.path().string() + " --layers 3,x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--layers"), std::string::npos) << r.output;
  r = run_cli("make-random --config " + asset("test-every-role.json") + " --out " +
              dir.path().string() + " --layers 99");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("layer 99 does not exist"), std::string::npos) << r.output;
  r = run_cli("inspect /nonexistent/model");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/model"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace flashdesk
