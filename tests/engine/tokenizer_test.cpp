// Tokenizer mechanics on tokenizers built in the test: merges by rank, added-token flags,
// invalid input, decoding, and every load error naming the file and the field.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"
#include "tests/engine/tokenizer_test_util.h"

namespace flashdesk {
namespace {

using test::added_token;
using test::byte_level_tokenizer;
using Ids = std::vector<TokenId>;
using nlohmann::json;

// Byte ids are the byte values (see byte_level_tokenizer); merged tokens follow from 256.
TEST(Bpe, MergesLowestRankFirst) {
  // ab (256), bc (257), abc = ab + c (258). "abc": (a,b) ranks before (b,c), then ab + c.
  const auto tok = Tokenizer::from_json(byte_level_tokenizer({{"a", "b"}, {"b", "c"}, {"ab", "c"}}), "t");
  EXPECT_EQ(tok.encode("abc"), (Ids{258}));
  EXPECT_EQ(tok.encode("bc"), (Ids{257}));
  EXPECT_EQ(tok.encode("cab"), (Ids{'c', 256}));
  // With (b,c) ranked first, "abc" becomes a + bc and stops: no merge joins a with bc.
  const auto other = Tokenizer::from_json(byte_level_tokenizer({{"b", "c"}, {"a", "b"}, {"ab", "c"}}), "t");
  EXPECT_EQ(other.encode("abc"), (Ids{'a', 256}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  const auto tok = Tokenizer::from_json(byte_level_tokenizer({{"a", "a"}}), "t");
  EXPECT_EQ(tok.encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(tok.encode("aaaa"), (Ids{256, 256}));
}

// An independent, naive BPE (rescan everything after every merge) as the oracle for pieces long
// enough to take the heap path.
Ids naive_bpe(const std::string& word, const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> sym;
  for (char c : word) sym.emplace_back(1, c);
  for (;;) {
    size_t best_rank = merges.size(), best_at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i)
      for (size_t r = 0; r < best_rank; ++r)
        if (merges[r].first == sym[i] && merges[r].second == sym[i + 1]) best_rank = r, best_at = i;
    if (best_rank == merges.size()) break;
    sym[best_at] += sym[best_at + 1];
    sym.erase(sym.begin() + best_at + 1);
  }
  Ids ids;
  for (const auto& s : sym) {
    if (s.size() == 1) {
      ids.push_back(static_cast<uint8_t>(s[0]));
      continue;
    }
    TokenId id = 256;  // ids of merged tokens follow the merge order (first appearance)
    std::vector<std::string> seen;
    for (const auto& [a, b] : merges) {
      if (std::find(seen.begin(), seen.end(), a + b) != seen.end()) continue;
      if (a + b == s) break;
      seen.push_back(a + b), ++id;
    }
    ids.push_back(id);
  }
  return ids;
}

TEST(Bpe, LongPiecesMergeLikeANaiveImplementation) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"}, {"b", "a"}, {"a", "a"}, {"ab", "a"}, {"aa", "b"}, {"ba", "b"}, {"ab", "ab"}, {"b", "b"}, {"aab", "ba"}};
  const auto tok = Tokenizer::from_json(byte_level_tokenizer(merges), "t");
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    std::string word(1 + rng() % 120, 'a');  // one piece: letters only
    for (char& c : word) c = "ab"[rng() % 2];
    EXPECT_EQ(tok.encode(word), naive_bpe(word, merges)) << word;
  }
}

json with_flags(json token, bool lstrip, bool rstrip, bool single_word = false) {
  token["lstrip"] = lstrip;
  token["rstrip"] = rstrip;
  token["single_word"] = single_word;
  return token;
}

TEST(AddedTokens, MatchedBeforePreTokenizationLongestFirst) {
  const json added = {added_token(300, "<x>"), added_token(301, "<x><y>"), added_token(302, "y>")};
  const auto tok = Tokenizer::from_json(byte_level_tokenizer({}, added), "t");
  EXPECT_EQ(tok.encode("a<x><y>b"), (Ids{'a', 301, 'b'}));
  EXPECT_EQ(tok.encode("<x>y>"), (Ids{300, 302}));
  EXPECT_EQ(tok.encode("<x", {}), (Ids{'<', 'x'}));
  EXPECT_EQ(tok.encode("<x>", {.match_added_tokens = false}), (Ids{'<', 'x', '>'}));
}

TEST(AddedTokens, LstripAndRstripSwallowWhitespace) {
  const json added = {with_flags(added_token(300, "<m>"), true, false), with_flags(added_token(301, "<r>"), false, true)};
  const auto tok = Tokenizer::from_json(byte_level_tokenizer({}, added), "t");
  EXPECT_EQ(tok.encode("a  <m> b"), (Ids{'a', 300, ' ', 'b'}));
  EXPECT_EQ(tok.encode("a <r> \n b"), (Ids{'a', ' ', 301, 'b'}));
  EXPECT_EQ(tok.decode(tok.encode("a  <m> b")), "a<m> b");  // the swallowed spaces are gone
}

TEST(AddedTokens, SingleWordOnlyBetweenNonWordCharacters) {
  const json added = {with_flags(added_token(300, "ab"), false, false, true)};
  const auto tok = Tokenizer::from_json(byte_level_tokenizer({}, added), "t");
  EXPECT_EQ(tok.encode("x ab."), (Ids{'x', ' ', 300, '.'}));
  EXPECT_EQ(tok.encode("xab"), (Ids{'x', 'a', 'b'}));
  EXPECT_EQ(tok.encode("abc"), (Ids{'a', 'b', 'c'}));
}

TEST(AddedTokens, NormalizedTokensMatchAfterNormalization) {
  json added = added_token(300, "<n>", false);
  added["normalized"] = true;
  json doc = json::parse(byte_level_tokenizer({}, json::array({added})));
  doc["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "N"}}}, {"content", "n"}};
  const auto tok = Tokenizer::from_json(doc.dump(), "t");
  EXPECT_EQ(tok.encode("<N>"), (Ids{300}));  // "<N>" normalizes to "<n>"
  EXPECT_EQ(tok.encode("aN"), (Ids{'a', 'n'}));
}

TEST(Tokenizer, InvalidUtf8IsEncodedByteForByte) {
  const auto tok = Tokenizer::from_json(byte_level_tokenizer({}), "t");
  const std::string bad = "ok\xff\xfe\xe2\x82 \xc0\xaf!";
  const Ids ids = tok.encode(bad);
  EXPECT_EQ(ids.size(), bad.size());
  EXPECT_EQ(tok.decode_bytes(ids), bad);
  EXPECT_EQ(tok.decode(ids), "ok\uFFFD\uFFFD\uFFFD \uFFFD\uFFFD!");
}

TEST(Tokenizer, LooksUpSpellingsAndFlags) {
  const auto tok = Tokenizer::from_json(
      byte_level_tokenizer({{"a", "b"}}, json::array({added_token(400, "<s>"), added_token(401, "<t>", false)})), "t");
  EXPECT_EQ(tok.token_id("<s>"), 400);
  EXPECT_EQ(tok.token_id("ab"), 256);
  EXPECT_EQ(tok.token_id("\u0120"), ' ');  // the vocab spells bytes in the byte-level alphabet
  EXPECT_FALSE(tok.token_id("nope"));
  EXPECT_THROW(tok.require_token_id("nope"), FormatError);
  EXPECT_TRUE(tok.is_special(400));
  EXPECT_FALSE(tok.is_special(401));
  EXPECT_EQ(tok.id_bound(), 402);
  EXPECT_FALSE(tok.contains(300));  // a gap in the ids
  EXPECT_THROW(tok.decode(Ids{300}), InvalidRequest);
  EXPECT_THROW(tok.decode(Ids{-1}), InvalidRequest);
  EXPECT_EQ(tok.decode(Ids{400, 'x', 401}), "<s>x<t>");
  EXPECT_EQ(tok.decode(Ids{400, 'x', 401}, {.skip_special = true}), "x<t>");
}

// Loads `json_text` expecting a FormatError whose message contains every fragment.
void expect_format_error(const std::string& json_text, std::vector<std::string> fragments) {
  try {
    Tokenizer::from_json(json_text, "dir/tokenizer.json");
    ADD_FAILURE() << "loaded without error; wanted " << fragments[0];
  } catch (const FormatError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.file(), "dir/tokenizer.json");
    for (const auto& f : fragments) EXPECT_NE(what.find(f), std::string::npos) << what;
  }
}

json valid_doc() { return json::parse(byte_level_tokenizer({{"a", "b"}})); }

TEST(TokenizerErrors, NameTheFileAndTheField) {
  expect_format_error("{\"model\": ", {"dir/tokenizer.json", "invalid JSON"});
  expect_format_error("[1, 2]", {"expected an object"});
  json d = valid_doc();
  d["model"]["type"] = "WordPiece";
  expect_format_error(d.dump(), {"model.type", "unsupported tokenizer model type \"WordPiece\""});
  d = valid_doc();
  d["model"]["merges"].push_back({"zz", "b"});
  expect_format_error(d.dump(), {"model.merges[1]", "unknown token \"zz\""});
  d = valid_doc();
  d["model"]["merges"].push_back("a b c");
  expect_format_error(d.dump(), {"model.merges[1]", "one space"});
  d = valid_doc();
  d["model"]["vocab"]["dup"] = 5;
  expect_format_error(d.dump(), {"model.vocab", "duplicate id 5"});
  d = valid_doc();
  d["model"]["vocab"]["neg"] = -3;
  expect_format_error(d.dump(), {"model.vocab.neg", "out of range"});
  d = valid_doc();
  d["model"].erase("vocab");
  expect_format_error(d.dump(), {"model.vocab", "missing"});
  d = valid_doc();
  d["added_tokens"] = {added_token(300, "<a>"), added_token(300, "<b>")};
  expect_format_error(d.dump(), {"added_tokens[1]", "duplicate id 300"});
  d = valid_doc();
  d["added_tokens"] = {added_token(97, "<a>")};
  expect_format_error(d.dump(), {"added_tokens[0]", "id 97"});
  d = valid_doc();
  d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{N}+";
  expect_format_error(d.dump(), {"pre_tokenizer.pretokenizers[0].pattern.Regex", "unsupported pre-tokenizer regex"});
  d = valid_doc();
  d["normalizer"] = {{"type", "NFKC"}};
  expect_format_error(d.dump(), {"normalizer.type", "unsupported normalizer type \"NFKC\""});
  d = valid_doc();
  d["decoder"] = {{"type", "WordPiece"}};
  expect_format_error(d.dump(), {"decoder.type", "unsupported decoder type"});
  d = valid_doc();
  d["model"]["vocab"].erase("\u0120");
  expect_format_error(d.dump(), {"model.vocab", "no token for byte 32"});
}

TEST(TokenizerErrors, DeeplyNestedInputIsRejectedNotRecursed) {
  std::string deep = "{\"model\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_format_error(deep, {"model"});
  json seq = {{"type", "Sequence"}, {"pretokenizers", json::array()}};
  for (int i = 0; i < 40; ++i) seq = {{"type", "Sequence"}, {"pretokenizers", {seq}}};
  json d = valid_doc();
  d["pre_tokenizer"] = seq;
  expect_format_error(d.dump(), {"nested too deeply"});
}

TEST(TokenizerErrors, MissingFileIsAnIoError) {
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), IoError);
}

}  // namespace
}  // namespace flashdesk
