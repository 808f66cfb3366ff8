// Engram's compressed-token map built by the engine: the normalisation rules one by one, the
// tokenizer's length and token strings, and the whole map against the Python builder
// (tools/engram_map.py) on the shipped tokenizers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

#include "engine/checkpoint/engram_map.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/compressed_token_map.h"
#include "engine/tokenizer/engram_normalizer.h"
#include "engine/util/sha256.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

#ifndef FLASHDESK_HAVE_ICU
// A build without ICU (engine/CMakeLists.txt) builds no Engram map from tokenizer.json.
TEST(EngramNormalizeWithoutIcu, Skipped) { GTEST_SKIP() << "built without ICU: no Engram map from tokenizer.json"; }
#else

const std::filesystem::path kSource = FD_SOURCE_DIR;

TEST(EngramNormalize, FollowsTheOfficialNormalizerSequence) {
  EXPECT_EQ(engram_normalize(" \t Caf\u00e9\n\n"), "cafe");  // strip, NFD + accent dropped
  EXPECT_EQ(engram_normalize("Hello"), "hello");             // lowercase
  EXPECT_EQ(engram_normalize("a  \t\r\nb"), "a b");          // [ \t\r\n]+ -> " "
  EXPECT_EQ(engram_normalize("\r\n"), " ");                  // a lone space survives
  EXPECT_EQ(engram_normalize(" "), " ");
  EXPECT_EQ(engram_normalize("\u3000x\u3000"), "x");            // NFKC ideographic space
  EXPECT_EQ(engram_normalize("\u2028"), "");                    // White_Space, stripped
  EXPECT_EQ(engram_normalize("\u00a0a\u00a0"), "a");            // NBSP -> NFKC space
  EXPECT_EQ(engram_normalize("\u00bd"), "1\u20442");            // NFKC fraction
  EXPECT_EQ(engram_normalize("\ufb01"), "fi");                  // NFKC ligature
  EXPECT_EQ(engram_normalize("\uff21\uff22"), "ab");            // fullwidth -> ASCII, lower
  EXPECT_EQ(engram_normalize("\u0391\u03a3"), "\u03b1\u03c3");  // per character: no final sigma
  EXPECT_EQ(engram_normalize("\u0130"), "i");                   // NFD first: I + dot, dot dropped
  EXPECT_EQ(engram_normalize("\u0915\u093e"), "\u0915");        // Mc dropped as well as Mn
  EXPECT_EQ(engram_normalize("x\ue000y"), "x y");               // every U+E000 -> " "
  EXPECT_EQ(engram_normalize("\ue000 "), " ");                  // sentinel is not stripped
  EXPECT_EQ(engram_normalize("\u0301"), "");                    // a lone mark normalises away
  EXPECT_EQ(engram_normalize("\x0b"
                             "a"
                             "\x0c"),
            "a");  // VT/FF: stripped, not collapsed
  EXPECT_EQ(engram_normalize("a\x0b\x0b"
                             "b"),
            "a\x0b\x0b"
            "b");
  EXPECT_EQ(engram_normalize(""), "");
}

TEST(EngramNormalize, IllFormedInputDoesNotCrash) {
  EXPECT_EQ(engram_normalize("a\xff"), "a\ufffd");
}

// The 256 byte tokens (ids 0..255), then the tokens under test from id 256; id 262 unused, 263
// an added token.
Tokenizer hand_made_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::spell_byte(static_cast<uint8_t>(b))] = b;
  const char* more[] = {"Hello",        "\u0120hello",  "\u0120\u0120",
                        "\u010a\u010a", "\u00c3\u00a9", "\u0120E"};
  for (int i = 0; i < 6; ++i) vocab[more[i]] = 256 + i;
  const nlohmann::json doc = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
      {"added_tokens", {{{"id", 263}, {"content", "<\uff5cUser\uff5c>"}, {"special", true}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}}}};
  return Tokenizer::from_json(doc.dump(), "hand.json");
}

TEST(CompressedTokenMap, KeysEveryTokenAsTheOfficialBuilder) {
  const Tokenizer t = hand_made_tokenizer();
  EXPECT_EQ(t.size(), 263);  // 262 vocab strings + one added: id 263 is beyond len(tokenizer)
  EXPECT_EQ(t.token_string(0xC3), std::optional<std::string_view>("\u00c3"));
  EXPECT_EQ(t.token_string(263), std::optional<std::string_view>("<\uff5cUser\uff5c>"));
  EXPECT_FALSE(t.token_string(262).has_value());
  const CompressedTokenMap m = build_compressed_token_map(t);
  ASSERT_EQ(m.ids.size(), 263u);
  auto id_of = [&](int token) { return m.ids[static_cast<size_t>(token)]; };
  EXPECT_EQ(id_of(0), 0);               // byte 0: "\0" normalises to itself
  EXPECT_EQ(id_of(' '), id_of('\n'));   // both normalise to " "
  EXPECT_EQ(id_of(258), id_of(' '));    // "  " -> " "
  EXPECT_EQ(id_of(259), id_of(' '));    // "\n\n" -> " "
  EXPECT_EQ(id_of(256), id_of(257));    // "Hello" and " hello" -> "hello"
  EXPECT_EQ(id_of(260), id_of('e'));    // "é" -> "e"
  EXPECT_EQ(id_of(261), id_of('e'));    // " E" -> "e"
  EXPECT_NE(id_of(0xC3), id_of(0xC4));  // lone bytes: keyed by their raw strings
  EXPECT_EQ(id_of('A'), id_of('a'));
  // Ids are numbered by first appearance: each is a seen id or the next new one.
  EXPECT_EQ(token_map_problem(m.ids, m.size), "");
}

TEST(CompressedTokenMap, FlashTinyMapEqualsTheShippedOne) {
  const Tokenizer t = Tokenizer::from_file(kSource / "assets/models/flash-tiny/tokenizer.json");
  const CompressedTokenMap m = build_compressed_token_map(t);
  const ModelConfig cfg =
      load_model_config((kSource / "assets/models/flash-tiny/config.json").string());
  EXPECT_EQ(m.size, cfg.text.engram_compressed_vocab_size);
  EXPECT_EQ(m.ids, load_engram_token_map(
                       kSource / "assets/models/flash-tiny/engram_map.safetensors", cfg.text));
}

std::string map_sha256(const std::vector<int64_t>& ids) {
  Sha256 h;
  h.update(std::span(reinterpret_cast<const uint8_t*>(ids.data()), ids.size() * 8));
  return Sha256::hex(h.finish());
}

// tokenizers/<name>/engram_map_summary.json: what tools/engram_map.py --summary printed.
void expect_python_summary(const std::string& name) {
  const auto dir = kSource / "tests/data/tokenizers" / name;
  const auto want = nlohmann::json::parse(testing::read_text(dir / "engram_map_summary.json"));
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer t = Tokenizer::from_file(dir / "tokenizer.json");
  const CompressedTokenMap m = build_compressed_token_map(t);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ built    ] %s: %zu ids -> %lld compressed ids in %.3f s (parse + build)\n",
              name.c_str(), m.ids.size(), static_cast<long long>(m.size), seconds);
  EXPECT_EQ(static_cast<int64_t>(m.ids.size()), want.at("entries").get<int64_t>());
  EXPECT_EQ(m.size, want.at("compressed_vocab_size").get<int64_t>());
  EXPECT_EQ(map_sha256(m.ids), want.at("token_map_sha256").get<std::string>());
}

TEST(CompressedTokenMap, DeepSeekV3TokenizerMatchesThePythonBuilder) {
  expect_python_summary("deepseek-v3");
}

TEST(CompressedTokenMap, TinyTokenizerMatchesThePythonBuilder) {
  expect_python_summary("tiny");
}

#endif  // FLASHDESK_HAVE_ICU

}  // namespace
}  // namespace flashdesk
