// Checkpoint::open on real directories: both layouts, partial checkpoints, the fingerprint, and
// every kind of mismatch reported by name in one error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/util/error.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

using testing::TempDir;

const std::filesystem::path kEveryRole = testing::config_asset("test-every-role.json");

std::string open_error(const std::filesystem::path& dir, CheckpointOptions options = {}) {
  try {
    Checkpoint::open(dir, options);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error opening " << dir;
  return "";
}

// Rewrites model.safetensors through `edit`, which may change the list of tensors.
void rewrite_single_file(const std::filesystem::path& dir,
                         const std::function<void(std::vector<TensorData>&)>& edit) {
  std::vector<TensorData> tensors;
  std::map<std::string, std::string> metadata;
  {
    const SafetensorsFile f(dir / "model.safetensors");
    metadata = f.metadata();
    for (const auto& e : f.tensors()) {
      const uint8_t* p = f.data(e);
      tensors.push_back({e.name, e.dtype, e.shape, std::vector<uint8_t>(p, p + e.nbytes)});
    }
  }
  edit(tensors);
  write_safetensors(dir / "model.safetensors", tensors, metadata);
}

TEST(Checkpoint, OpensSingleFile) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(1));
  EXPECT_TRUE(std::filesystem::exists(dir / "model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  const auto ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt->config().name, "test-every-role");
  EXPECT_EQ(ckpt->roles().size(), 14u);
  EXPECT_EQ(ckpt->tensor_names().size(), expected_tensors(ckpt->config()).size());
  const TensorView v = ckpt->tensor("layers.10.attn.indexer.wq_b.weight");
  EXPECT_EQ(v.dtype, DType::F8_E4M3);
  EXPECT_EQ(v.dim(0), 256);  // 4 index heads x 64
  EXPECT_EQ(v.dim(1), 128);
  EXPECT_EQ(v.nbytes, 256u * 128u);
  EXPECT_TRUE(ckpt->has("layers.5.engram.wkv.scale"));
  EXPECT_FALSE(ckpt->has("layers.6.attn.compressor.wkv.weight"));
  EXPECT_TRUE(ckpt->partial_layers().empty());
  EXPECT_EQ(ckpt->engram_token_map().size(), 512u);
  EXPECT_EQ(ckpt->files().size(), 2u);  // model.safetensors + engram_map.safetensors
}

TEST(Checkpoint, OpensShardsAndFingerprintIgnoresLayoutOnlyWhereBytesAgree) {
  TempDir single, sharded, again, other_seed;
  write_random_checkpoint(kEveryRole, single.path(), testing::random_options(2));
  write_random_checkpoint(kEveryRole, sharded.path(), testing::random_options(2, 1 << 20));
  write_random_checkpoint(kEveryRole, again.path(), testing::random_options(2, 0, 1));
  write_random_checkpoint(kEveryRole, other_seed.path(), testing::random_options(3));
  EXPECT_TRUE(std::filesystem::exists(sharded / "model.safetensors.index.json"));
  const auto a = Checkpoint::open(single.path());
  const auto b = Checkpoint::open(sharded.path());
  EXPECT_GT(b->files().size(), 3u);
  EXPECT_EQ(a->tensor_names(), b->tensor_names());
  for (const char* name : {"embed.weight", "layers.13.ffn.experts.7.w3.weight",
                           "layers.8.attn.compressor.norm.weight"}) {
    const TensorView x = a->tensor(name), y = b->tensor(name);
    ASSERT_EQ(x.nbytes, y.nbytes);
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0) << name;
  }
  const std::string fp = a->fingerprint();
  EXPECT_EQ(fp.size(), 64u);
  EXPECT_EQ(Checkpoint::open(single.path())->fingerprint(), fp);  // reopened
  EXPECT_EQ(Checkpoint::open(again.path())->fingerprint(), fp);   // rewritten, other dir, 1 thread
  EXPECT_NE(b->fingerprint(), fp);                                // other files
  EXPECT_NE(Checkpoint::open(other_seed.path())->fingerprint(), fp);
}

TEST(Checkpoint, FingerprintFollowsConfigBytes) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(4));
  const std::string before = Checkpoint::open(dir.path())->fingerprint();
  testing::write_text(dir / "config.json", testing::read_text(dir / "config.json") + "\n");
  EXPECT_NE(Checkpoint::open(dir.path())->fingerprint(), before);
}

TEST(Checkpoint, ReportsEveryMismatchByName) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(6));
  rewrite_single_file(dir.path(), [](std::vector<TensorData>& t) {
    std::erase_if(t, [](const TensorData& d) {
      return d.name == "layers.4.ffn_norm.weight" || d.name == "layers.12.attn.indexer.wq_b.scale";
    });
    t.push_back({"layers.4.unknown.weight", DType::F32, {2}, std::vector<uint8_t>(8)});
    for (TensorData& d : t) {
      if (d.name == "layers.0.attn.attn_sink") {  // F32 [4] -> BF16 [4]
        d.dtype = DType::BF16;
        d.bytes.resize(8);
      }
      if (d.name == "norm.weight") {  // [256] -> [2, 128]
        d.shape = {2, 128};
      }
    }
  });
  const std::string msg = open_error(dir.path());
  for (const char* part :
       {"5 problems", "missing layers.4.ffn_norm.weight",
        "missing layers.12.attn.indexer.wq_b.scale", "unexpected layers.4.unknown.weight",
        "wrong dtype layers.0.attn.attn_sink", "BF16, expected F32", "wrong shape norm.weight",
        "[2, 128], expected [256]"})
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
}

TEST(Checkpoint, MissingShardIsNamed) {
  TempDir dir;
  const auto summary =
      write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(7, 4 << 20));
  ASSERT_GE(summary.files.size(), 4u);
  const std::string second = summary.files[1];
  EXPECT_TRUE(second.starts_with("model-00002-of-0000")) << second;
  std::filesystem::remove(dir / second);
  const std::string msg = open_error(dir.path());
  EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing shard"), std::string::npos) << msg;
  EXPECT_NE(msg.find(second), std::string::npos) << msg;
}

TEST(Checkpoint, IndexMustAgreeWithShards) {
  TempDir dir;
  const auto summary =
      write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(8, 4 << 20));
  auto index = nlohmann::json::parse(testing::read_text(dir / "model.safetensors.index.json"));
  const std::string first =
      summary.files[0];  // embed.weight's shard; norm.weight is in a later one
  ASSERT_NE(index["weight_map"]["norm.weight"], first);
  index["weight_map"]["norm.weight"] = first;
  index["weight_map"]["ghost.weight"] = first;
  testing::write_text(dir / "model.safetensors.index.json", index.dump());
  const std::string msg = open_error(dir.path());
  EXPECT_NE(msg.find("tensor norm.weight is in model-0000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index lists ghost.weight"), std::string::npos) << msg;
  index["weight_map"]["x"] = "../outside.safetensors";
  testing::write_text(dir / "model.safetensors.index.json", index.dump());
  EXPECT_NE(open_error(dir.path()).find("weight_map.x"), std::string::npos);
  testing::write_text(dir / "model.safetensors.index.json", "{\"weight_map\": [");
  EXPECT_NE(open_error(dir.path()).find("invalid JSON"), std::string::npos);
}

TEST(Checkpoint, BrokenFilesAreTypedErrors) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(9));
  const auto bytes = testing::read_bytes(dir / "model.safetensors");
  testing::write_bytes(dir / "model.safetensors", bytes.data(), bytes.size() / 2);  // truncated
  EXPECT_NE(open_error(dir.path()).find("outside the data section"), std::string::npos);
  testing::write_bytes(dir / "model.safetensors", bytes.data(), 5);
  EXPECT_NE(open_error(dir.path()).find("truncated"), std::string::npos);
  std::filesystem::remove(dir / "model.safetensors");
  EXPECT_NE(open_error(dir.path()).find("no model.safetensors"), std::string::npos);
  std::filesystem::remove(dir / "config.json");
  EXPECT_NE(open_error(dir.path()).find("config.json"), std::string::npos);
}

TEST(Checkpoint, PartialCheckpointNeedsTheOption) {
  TempDir dir;
  const auto summary =
      write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(10, 0, 0, {11}));
  EXPECT_EQ(summary.layers, (std::vector<int64_t>{8, 10, 11}));  // + KV and index sources
  const std::string msg = open_error(dir.path());
  EXPECT_NE(msg.find("partial checkpoint"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8,10,11"), std::string::npos) << msg;
  const auto ckpt = Checkpoint::open(dir.path(), {.allow_partial = true});
  EXPECT_EQ(ckpt->partial_layers(), (std::vector<int64_t>{8, 10, 11}));
  EXPECT_TRUE(ckpt->has("layers.11.ffn.experts.0.w1.weight"));
  EXPECT_TRUE(ckpt->has("embed.weight"));
  EXPECT_FALSE(ckpt->has("layers.9.attn_norm.weight"));
  EXPECT_EQ(ckpt->roles().size(), 14u);  // roles describe the whole model
  // A complete checkpoint opens with the option too.
  TempDir full;
  write_random_checkpoint(kEveryRole, full.path(), testing::random_options(10));
  EXPECT_TRUE(Checkpoint::open(full.path(), {.allow_partial = true})->partial_layers().empty());
}

TEST(Checkpoint, PartialMarkerIsValidated) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(11, 0, 0, {10}));
  auto edit_marker = [&](const std::string& value) {
    std::vector<TensorData> tensors;
    {
      const SafetensorsFile f(dir / "model.safetensors");
      for (const auto& e : f.tensors())
        tensors.push_back(
            {e.name, e.dtype, e.shape, std::vector<uint8_t>(f.data(e), f.data(e) + e.nbytes)});
    }
    write_safetensors(dir / "model.safetensors", tensors,
                      {{std::string(kPartialLayersKey), value}});
  };
  edit_marker("10");  // misses layer 8, the KV source layer 10 reads
  EXPECT_NE(open_error(dir.path(), {.allow_partial = true}).find("closed over"), std::string::npos);
  edit_marker("8,x");
  EXPECT_NE(open_error(dir.path(), {.allow_partial = true}).find("comma-separated"),
            std::string::npos);
  edit_marker("8,10,99");
  EXPECT_NE(open_error(dir.path(), {.allow_partial = true}).find("does not exist"),
            std::string::npos);
}

TEST(Checkpoint, EngramMapIsValidated) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(12));
  std::vector<int64_t> map(512);
  for (int64_t i = 0; i < 512; ++i) map[i] = i < 400 ? i : 3;
  write_safetensors(dir / "engram_map.safetensors",
                    {{"token_map",
                      DType::I64,
                      {512},
                      std::vector<uint8_t>(reinterpret_cast<uint8_t*>(map.data()),
                                           reinterpret_cast<uint8_t*>(map.data()) + 4096)}});
  EXPECT_EQ(Checkpoint::open(dir.path())->engram_token_map()[450], 3);
  map[10] = 11;  // skips id 10: first occurrences must be numbered in order
  write_safetensors(dir / "engram_map.safetensors",
                    {{"token_map",
                      DType::I64,
                      {512},
                      std::vector<uint8_t>(reinterpret_cast<uint8_t*>(map.data()),
                                           reinterpret_cast<uint8_t*>(map.data()) + 4096)}});
  std::string msg = open_error(dir.path());
  EXPECT_NE(msg.find("engram_map.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("token_map[10] = 11"), std::string::npos) << msg;
  write_safetensors(dir / "engram_map.safetensors",
                    {{"token_map", DType::I32, {2}, std::vector<uint8_t>(8)}});
  EXPECT_NE(open_error(dir.path()).find("I64"), std::string::npos);
  for (int64_t i = 0; i < 512; ++i) map[i] = i < 300 ? i : 0;  // only 300 of 400 ids used
  write_safetensors(dir / "engram_map.safetensors",
                    {{"token_map",
                      DType::I64,
                      {512},
                      std::vector<uint8_t>(reinterpret_cast<uint8_t*>(map.data()),
                                           reinterpret_cast<uint8_t*>(map.data()) + 4096)}});
  EXPECT_NE(open_error(dir.path()).find("uses 300"), std::string::npos);
}

}  // namespace
}  // namespace flashdesk
