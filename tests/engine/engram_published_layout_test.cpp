// A published V4.1 directory has no engram_map.safetensors: the engine builds the token map from
// tokenizer.json at load (cached beside the KV data) and must run exactly as with the shipped
// map; a shipped map stays accepted but is checked (its multipliers, its length); the Engram
// compressed vocabulary may exceed vocab_size.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

#include "engine/checkpoint/engram_map.h"
#include "engine/checkpoint/engram_multipliers.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/model/engram_map_cache.h"
#include "engine/runtime/chat_engine.h"
#include "engine/util/error.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk {
namespace {

#ifndef FLASHDESK_HAVE_ICU
// A build without ICU (engine/CMakeLists.txt) builds no Engram map from tokenizer.json.
TEST(EngramPublishedLayoutWithoutIcu, Skipped) { GTEST_SKIP() << "built without ICU: no Engram map from tokenizer.json"; }
#else

using test::TempDir;

const std::filesystem::path kSource = FD_SOURCE_DIR;
const std::filesystem::path kFlashTiny = kSource / "assets/models/flash-tiny";

// flash-tiny as published: every file but engram_map.safetensors.
void copy_without_map(const std::filesystem::path& to) {
  std::filesystem::create_directories(to);
  for (const auto& e : std::filesystem::directory_iterator(kFlashTiny))
    if (e.path().filename() != kEngramMapFile)
      std::filesystem::copy_file(e.path(), to / e.path().filename());
}

std::vector<float> last_logits(const std::filesystem::path& dir, const ModelOptions& options,
                               std::span<const int32_t> ids) {
  CpuReferenceBackend be(2);
  Model m(Checkpoint::open(dir), be, options);
  SequenceState s = m.new_sequence();
  return m.prefill(s, ids, PrefillOptions{});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(EngramPublishedLayout, FlashTinyWithoutTheMapGivesTheSameLogits) {
  TempDir tmp;
  const auto published = tmp.path() / "flash-tiny";
  copy_without_map(published);
  const Tokenizer tok = Tokenizer::from_file(kFlashTiny / "tokenizer.json");
  // Ids with repeated n-grams and tokens whose keys merge (case, spaces), so hashes matter.
  const std::vector<int32_t> ids =
      tok.encode("Hello hello HELLO! My name is Quinn. my NAME is quinn.");
  const auto shipped = last_logits(kFlashTiny, {}, ids);
  const auto cache = tmp.path() / "cache" / "engram";
  ModelOptions built_options;
  built_options.engram_cache_dir = cache;
  const auto built = last_logits(published, built_options, ids);  // builds and caches
  EXPECT_EQ(built, shipped);
  EXPECT_TRUE(std::filesystem::exists(engram_map_cache_file(cache, tok)));
  EXPECT_EQ(last_logits(published, built_options, ids), shipped);  // from the cache
  EXPECT_EQ(last_logits(published, {}, ids), shipped);             // no cache: built again
}

TEST(EngramPublishedLayout, ChatEngineLoadsAPublishedDirectory) {
  TempDir tmp;
  copy_without_map(tmp.path() / "m");
  EngineOptions o;
  o.backend = "cpu-reference";
  o.threads = 2;
  o.engram_cache_dir = tmp.path() / "engram";
  const auto engine = ChatEngine::load(tmp.path() / "m", o);
  const auto expected =
      ChatEngine::load(kFlashTiny, EngineOptions{.backend = "cpu-reference", .threads = 2});
  const std::vector<int32_t> ids = engine->tokenizer().encode("What is 4821 + 3977?");
  SequenceState a = engine->model().new_sequence(), b = expected->model().new_sequence();
  EXPECT_EQ(engine->model().prefill(a, ids, PrefillOptions{}),
            expected->model().prefill(b, ids, PrefillOptions{}));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path() / "engram"),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(EngramPublishedLayout, TheTokenizerIsPartOfTheFingerprint) {
  TempDir tmp;
  copy_without_map(tmp.path() / "a");
  copy_without_map(tmp.path() / "b");
  std::ofstream(tmp.path() / "b/tokenizer.json", std::ios::app) << "\n";  // same JSON, new bytes
  const std::string a = Checkpoint::open(tmp.path() / "a")->fingerprint();
  EXPECT_NE(a, Checkpoint::open(tmp.path() / "b")->fingerprint());
  EXPECT_NE(a, Checkpoint::open(kFlashTiny)->fingerprint());
  EXPECT_EQ(a, Checkpoint::open(tmp.path() / "a")->fingerprint());
}

TEST(EngramPublishedLayout, NoMapAndNoTokenizerNamesBoth) {
  TempDir tmp;
  copy_without_map(tmp.path() / "m");
  std::filesystem::remove(tmp.path() / "m/tokenizer.json");
  const std::string msg = error_of([&] { last_logits(tmp.path() / "m", {}, {}); });
  EXPECT_NE(msg.find("engram_map.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
}

TEST(EngramPublishedLayout, CompressedSizeThatDisagreesWithTheTokenizerIsRefused) {
  TempDir tmp;
  copy_without_map(tmp.path() / "m");
  const auto cfg_path = tmp.path() / "m/config.json";
  nlohmann::json cfg = nlohmann::json::parse(testing::read_text(cfg_path));
  cfg["text_config"]["engram_compressed_vocab_size"] = 6865;
  testing::write_text(cfg_path, cfg.dump(2));
  const std::string msg = error_of([&] { last_logits(tmp.path() / "m", {}, {}); });
  EXPECT_NE(msg.find("engram_compressed_vocab_size: 6865"), std::string::npos) << msg;
  EXPECT_NE(msg.find("6864 compressed tokens"), std::string::npos) << msg;
}

void write_map(const std::filesystem::path& file, const std::vector<int64_t>& map,
               const std::vector<std::vector<int64_t>>& multipliers) {
  write_engram_map(file, map, multipliers);
}

TEST(EngramPublishedLayout, ShippedMapIsCheckedAgainstOfficialMultipliersAndTokenizer) {
  TempDir tmp;
  write_random_checkpoint(kSource / "assets/configs/test-every-role.json", tmp.path(),
                          testing::random_options(5));
  const ModelConfig cfg = load_model_config((tmp.path() / "config.json").string());
  const std::vector<int64_t> map = load_engram_token_map(tmp.path() / kEngramMapFile, cfg.text);
  auto mult = engram_multipliers(cfg.text);
  EXPECT_NO_THROW(Checkpoint::open(tmp.path()));
  mult[1][2] += 2;  // still odd and in range, but not what numpy draws
  write_map(tmp.path() / kEngramMapFile, map, mult);
  std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
  EXPECT_NE(msg.find("multipliers"), std::string::npos) << msg;
  EXPECT_NE(msg.find("differ from the official"), std::string::npos) << msg;
  // A map without a multipliers tensor is fine: the engine computes them.
  write_safetensors(
      tmp.path() / kEngramMapFile,
      {{"token_map",
        DType::I64,
        {static_cast<int64_t>(map.size())},
        std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(map.data()),
                             reinterpret_cast<const uint8_t*>(map.data()) + map.size() * 8)}});
  const std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(tmp.path());
  // With a tokenizer, the map must have one entry per token of it (the tiny one has 565).
  const Tokenizer tiny =
      Tokenizer::from_file(kSource / "tests/data/tokenizers/tiny/tokenizer.json");
  CpuReferenceBackend be(1);
  ModelOptions with_tokenizer;
  with_tokenizer.tokenizer = &tiny;
  msg = error_of([&] { Model(ckpt, be, with_tokenizer); });
  EXPECT_NE(msg.find("token_map has 512 entries"), std::string::npos) << msg;
  EXPECT_NE(msg.find("565"), std::string::npos) << msg;
}

TEST(EngramPublishedLayout, CompressedVocabularyLargerThanVocabSizeRuns) {
  TempDir tmp;
  nlohmann::json cfg =
      nlohmann::json::parse(testing::read_text(kSource / "assets/configs/test-every-role.json"));
  cfg["text_config"]["engram_compressed_vocab_size"] = 700;  // vocab_size 512
  testing::write_text(tmp.path() / "cfg.json", cfg.dump(2));
  write_random_checkpoint(tmp.path() / "cfg.json", tmp.path() / "m", testing::random_options(6));
  const std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(tmp.path() / "m");
  EXPECT_EQ(ckpt->engram_token_map().size(), 700u);  // one entry per tokenizer token
  CpuReferenceBackend be(2);
  Model m(ckpt, be);
  SequenceState s = m.new_sequence();
  const auto ids = test::test_prompt(40, 512, 3);
  const auto logits = m.prefill(s, ids, PrefillOptions{});
  EXPECT_EQ(logits.size(), 512u);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  SequenceState t = m.new_sequence();
  const std::vector<int32_t> beyond = {5, 600};  // a tokenizer id with no embedding row
  EXPECT_THROW(m.prefill(t, beyond, PrefillOptions{}), InvalidRequest);
}

// The tiny test tokenizer has 565 entries (chat tokens at 556..564) and 462 compressed ids.
std::filesystem::path published_with_tiny_tokenizer(const TempDir& tmp, int64_t vocab_size) {
  nlohmann::json cfg =
      nlohmann::json::parse(testing::read_text(kSource / "assets/configs/test-every-role.json"));
  cfg["text_config"]["vocab_size"] = vocab_size;
  cfg["text_config"]["engram_compressed_vocab_size"] = 462;
  const auto cfg_path = tmp.path() / ("cfg" + std::to_string(vocab_size) + ".json");
  testing::write_text(cfg_path, cfg.dump(2));
  const auto dir = tmp.path() / ("m" + std::to_string(vocab_size));
  write_random_checkpoint(cfg_path, dir, testing::random_options(7));
  std::filesystem::remove(dir / kEngramMapFile);
  std::filesystem::copy_file(kSource / "tests/data/tokenizers/tiny/tokenizer.json",
                             dir / "tokenizer.json");
  return dir;
}

TEST(EngramPublishedLayout, TokenizerLongerThanTheEmbeddingLoadsIfChatTokensAreRows) {
  TempDir tmp;
  EngineOptions o;
  o.backend = "cpu-reference";
  o.threads = 2;
  // vocab_size 563: ids 563 and 564 (pad, image: unused by a text chat) have no embedding row.
  const auto engine = ChatEngine::load(published_with_tiny_tokenizer(tmp, 563), o);
  EXPECT_EQ(engine->tokenizer().size(), 565);
  const std::vector<int32_t> ids = engine->tokenizer().encode("hello there");
  SequenceState s = engine->model().new_sequence();
  EXPECT_EQ(engine->model().prefill(s, ids, PrefillOptions{}).size(), 563u);
  // vocab_size 562: the end-of-sentence token (562) would have no row.
  const auto dir = published_with_tiny_tokenizer(tmp, 562);
  const std::string msg = error_of([&] { ChatEngine::load(dir, o); });
  EXPECT_NE(msg.find("end of sentence token is id 562"), std::string::npos) << msg;
  EXPECT_NE(msg.find("vocab_size 562"), std::string::npos) << msg;
}

#endif  // FLASHDESK_HAVE_ICU

}  // namespace
}  // namespace flashdesk
