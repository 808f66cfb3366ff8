// Our encoder against an independent one (transformers.js, tools/tokenizer_parity/) on the corpus.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer_test_util.h"

namespace flashdesk {
namespace {

using test::read_file;
using test::tokenizer_data;

struct ParityTotals {
  size_t documents = 0, bytes = 0, tokens = 0, mismatched = 0;
};

// Describes where `got` first leaves `want`, with the tokens around it decoded.
std::string first_difference(const Tokenizer& tok, const std::vector<TokenId>& got,
                             const std::vector<TokenId>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const auto window = [&](const std::vector<TokenId>& ids) {
    std::string s;
    for (size_t k = i; k < ids.size() && k < i + 6; ++k) {
      s += std::to_string(ids[k]) + "(" + tok.decode(std::span(&ids[k], 1)) + ") ";
    }
    return s;
  };
  return "first difference at token " + std::to_string(i) + " of " + std::to_string(want.size()) +
         ": got " + window(got) + "want " + window(want);
}

ParityTotals check_parity(const std::string& tokenizer_file, const std::string& expected_file) {
  const Tokenizer tok = Tokenizer::from_file(tokenizer_data(tokenizer_file));
  const auto expected = nlohmann::json::parse(read_file(tokenizer_data(expected_file)));
  ParityTotals totals;
  for (const auto& [name, ids] : expected["documents"].items()) {
    const std::string text = read_file(tokenizer_data("corpus/" + name));
    const auto want = ids.get<std::vector<TokenId>>();
    const std::vector<TokenId> got = tok.encode(text);
    ++totals.documents;
    totals.bytes += text.size();
    totals.tokens += want.size();
    if (got != want) {
      ++totals.mismatched;
      ADD_FAILURE() << name << ": " << first_difference(tok, got, want);
    }
    EXPECT_EQ(tok.decode(got), text) << name << ": decode(encode(x)) != x";
    EXPECT_EQ(tok.decode_bytes(got), text) << name;
  }
  std::printf("parity %s: %zu documents, %zu bytes, %zu tokens, %zu mismatched documents\n",
              tokenizer_file.c_str(), totals.documents, totals.bytes, totals.tokens,
              totals.mismatched);
  return totals;
}

TEST(TokenizerParity, DeepSeekV3MatchesTransformersJsOnWholeCorpus) {
  const ParityTotals t =
      check_parity("deepseek-v3/tokenizer.json", "deepseek-v3/expected_ids.json");
  EXPECT_EQ(t.mismatched, 0u);
  EXPECT_GE(t.bytes, 100u * 1024) << "the corpus must stay at least 100 KB";
  EXPECT_GE(t.documents, 20u);
}

TEST(TokenizerParity, TinyTokenizerWithPairMergesMatchesTransformersJs) {
  const ParityTotals t = check_parity("tiny/tokenizer.json", "tiny/expected_ids.json");
  EXPECT_EQ(t.mismatched, 0u);
  EXPECT_GE(t.documents, 10u);
}

}  // namespace
}  // namespace flashdesk
