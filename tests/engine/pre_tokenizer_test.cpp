// DeepSeek's pre-tokenizer split on cases derived by hand from the regex semantics.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "tests/engine/tokenizer_test_util.h"

namespace flashdesk {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const PreTokenizerSpec& spec, const std::string& text) {
  PreTokenizerScratch scratch;
  std::vector<Piece> pieces;
  const std::string_view split_text = pre_tokenize(spec, text, scratch, pieces);
  Pieces out;
  for (const Piece& p : pieces)
    out.push_back(std::string(split_text.substr(p.begin, p.end - p.begin)));
  return out;
}

PreTokenizerSpec deepseek_spec() {
  return parse_tokenizer_json(test::read_file(test::tokenizer_data("tiny/tokenizer.json")), "tiny")
      .pre_tokenizer;
}

TEST(DeepSeekPreTokenizer, WordsTakeOneLeadingSpace) {
  const auto spec = deepseek_spec();
  EXPECT_EQ(split(spec, "Hello world"), (Pieces{"Hello", " world"}));
  // Two spaces before a word: \s+(?!\S) backs off one, the last space joins the word.
  EXPECT_EQ(split(spec, "a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split(spec, "a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split(spec, "end  "), (Pieces{"end", "  "}));  // trailing run: kept whole
}

TEST(DeepSeekPreTokenizer, DigitsSplitInThreesFromTheLeft) {
  const auto spec = deepseek_spec();
  EXPECT_EQ(split(spec, "12345"), (Pieces{"123", "45"}));
  EXPECT_EQ(split(spec, "x1234567y"), (Pieces{"x", "123", "456", "7", "y"}));
  // \p{N} includes other scripts' digits and fractions (Nd, No).
  EXPECT_EQ(split(spec, "\u0661\u0662\u0663\u0664"), (Pieces{"\u0661\u0662\u0663", "\u0664"}));
  EXPECT_EQ(split(spec, "3\u00bd"), (Pieces{"3\u00bd"}));
}

TEST(DeepSeekPreTokenizer, CjkAndKanaRunsAreIsolated) {
  const auto spec = deepseek_spec();
  EXPECT_EQ(split(spec, "你好世界abc"), (Pieces{"你好世界", "abc"}));
  EXPECT_EQ(split(spec, "カタカナとひらがな漢字"), (Pieces{"カタカナとひらがな漢字"}));
  // U+9FA6 lies past the range: it is a plain letter, so the word pattern takes it.
  EXPECT_EQ(split(spec, "中\u9fa6"), (Pieces{"中", "\u9fa6"}));
  EXPECT_EQ(split(spec, " 中文"), (Pieces{" ", "中文"}));
}

TEST(DeepSeekPreTokenizer, PunctuationRules) {
  const auto spec = deepseek_spec();
  EXPECT_EQ(split(spec, "don't"), (Pieces{"don", "'t"}));  // ASCII punct + ASCII letters
  // At " $HOME" the word alternatives fail and " ?[\p{P}\p{S}]+" takes " $".
  EXPECT_EQ(split(spec, ".Net $HOME"), (Pieces{".Net", " $", "HOME"}));
  EXPECT_EQ(split(spec, "hi!!\n\nyo"), (Pieces{"hi", "!!\n\n", "yo"}));  // trailing newlines join
  EXPECT_EQ(split(spec, "a, b"), (Pieces{"a", ",", " b"}));
  EXPECT_EQ(split(spec, "<<a"), (Pieces{"<<", "a"}));
  EXPECT_EQ(split(spec, "«élan»"), (Pieces{"«", "élan", "»"}));
  EXPECT_EQ(split(spec, "x = (y)"), (Pieces{"x", " =", " (", "y", ")"}));
}

TEST(DeepSeekPreTokenizer, NewlinesAndWhitespace) {
  const auto spec = deepseek_spec();
  EXPECT_EQ(split(spec, "a\r\nb"), (Pieces{"a", "\r\n", "b"}));
  EXPECT_EQ(split(spec, "x \n y"), (Pieces{"x", " \n", " y"}));  // up to the last newline
  EXPECT_EQ(split(spec, "x\n\n  y"), (Pieces{"x", "\n\n", " ", " y"}));
  EXPECT_EQ(split(spec, "\t\tz"), (Pieces{"\t", "\tz"}));
}

TEST(DeepSeekPreTokenizer, MarksJoinersAndEmoji) {
  const auto spec = deepseek_spec();
  EXPECT_EQ(split(spec, "e\u0301t\u00e9"), (Pieces{"e\u0301t\u00e9"}));
  EXPECT_EQ(split(spec, "\u0301a"), (Pieces{"\u0301a"}));  // a leading mark is the optional prefix
  // The ZWJ is neither letter, punctuation, symbol nor space: between two emoji nothing matches it.
  EXPECT_EQ(split(spec, "👨\u200d👩"), (Pieces{"👨", "\u200d", "👩"}));
  EXPECT_EQ(split(spec, "ok👍🏽!"), (Pieces{"ok", "👍🏽!"}));
}

// U+0085 is White_Space in Oniguruma (HF tokenizers), not in JS regexes; we follow Oniguruma:
// it joins the run of spaces before it. (transformers.js gives " ", "\u0085", "\u0085b".)
TEST(DeepSeekPreTokenizer, NextLineIsWhitespaceAsInOniguruma) {
  const auto spec = deepseek_spec();
  EXPECT_EQ(split(spec, "a \u0085\u0085b"), (Pieces{"a", " \u0085", "\u0085b"}));
  // U+FEFF is a format character (not whitespace): two in a row match nothing and stay together.
  EXPECT_EQ(split(spec, "x\ufeff\ufeff"), (Pieces{"x", "\ufeff\ufeff"}));
}

TEST(DeepSeekPreTokenizer, InvalidUtf8IsOneUnitOfClassOther) {
  const auto spec = deepseek_spec();
  EXPECT_EQ(split(spec,
                  "ab\xff"
                  "cd"),
            (Pieces{"ab",
                    "\xff"
                    "cd"}));
  EXPECT_EQ(split(spec, "a \xe2\x82"), (Pieces{"a", " ", "\xe2\x82"}));
}

TEST(Gpt2PreTokenizer, ByteLevelRegexAndPrefixSpace) {
  const PreTokenizerSpec spec{{}, true, true, true};
  EXPECT_EQ(split(spec, "Hello world's 123!"), (Pieces{" Hello", " world", "'s", " 123", "!"}));
  EXPECT_EQ(split(spec, " x  y"), (Pieces{" x", " ", " y"}));
  // The prefix space goes before each piece of the earlier steps, not before each GPT-2 piece.
  const SplitPattern dash{SplitPatternKind::kLiteral, {'-'}};
  const PreTokenizerSpec after_split{{{dash, SplitBehavior::kIsolated}}, true, true, true};
  EXPECT_EQ(split(after_split, "ab-cd"), (Pieces{" ab", " -", " cd"}));
}

TEST(SplitBehaviors, MatchHfDocumentedExamples) {
  // tokenizers' docs split "the-final--countdown" on "-" with each behaviour.
  const SplitPattern dash{SplitPatternKind::kLiteral, {'-'}};
  const auto with = [&](SplitBehavior b) {
    return split(PreTokenizerSpec{{{dash, b}}, false, false, false}, "the-final--countdown");
  };
  EXPECT_EQ(with(SplitBehavior::kRemoved), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(with(SplitBehavior::kIsolated), (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(with(SplitBehavior::kMergedWithPrevious), (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(with(SplitBehavior::kMergedWithNext), (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(with(SplitBehavior::kContiguous), (Pieces{"the", "-", "final", "--", "countdown"}));
}

TEST(RecogniseRegex, AcceptsEscapedOrRawNewlinesAndRejectsOthers) {
  EXPECT_TRUE(recognise_regex(R"(\p{N}{1,3})"));
  const std::string raw = test::deepseek_pre_tokenizer()["pretokenizers"][2]["pattern"]["Regex"];
  EXPECT_TRUE(recognise_regex(raw));
  std::string escaped;
  for (char c : raw)
    escaped += c == '\r' ? std::string("\\r") : c == '\n' ? std::string("\\n") : std::string(1, c);
  EXPECT_TRUE(recognise_regex(escaped));
  EXPECT_FALSE(recognise_regex(R"(\p{N}{1,4})"));
  EXPECT_FALSE(recognise_regex(raw + "|x"));
}

}  // namespace
}  // namespace flashdesk
