// Text plumbing under the tokenizer: UTF-8 units, Unicode class tables, the byte-level alphabet
// and the streaming decoder, against hand-derived values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/streaming_decoder.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_class.h"
#include "engine/tokenizer/utf8.h"
#include "tests/engine/tokenizer_test_util.h"

namespace flashdesk {
namespace {

std::vector<std::pair<uint32_t, uint32_t>> units(std::string_view s) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (size_t i = 0; i < s.size();) {
    const auto u = utf8::decode(s, i);
    out.emplace_back(u.cp, u.size);
    i += u.size;
  }
  return out;
}

constexpr uint32_t kBad = utf8::Unit::kInvalid;

TEST(Utf8, DecodesMaximalSubparts) {
  EXPECT_EQ(units("a\u00e9\u20ac\U0001F600"),
            (decltype(units("")){{'a', 1}, {0xE9, 2}, {0x20AC, 3}, {0x1F600, 4}}));
  // Truncated 3-byte sequence: one unit for both bytes (as WHATWG: one U+FFFD).
  EXPECT_EQ(units("\xE2\x82"), (decltype(units("")){{kBad, 2}}));
  // E2 then '(' breaks it: the lead alone is ill-formed, '(' decodes, A1 is a stray continuation.
  EXPECT_EQ(units("\xE2(\xA1"), (decltype(units("")){{kBad, 1}, {'(', 1}, {kBad, 1}}));
  // Surrogates and overlongs are ill-formed at their second byte.
  EXPECT_EQ(units("\xED\xA0\x80"), (decltype(units("")){{kBad, 1}, {kBad, 1}, {kBad, 1}}));
  EXPECT_EQ(units("\xC0\xAF"), (decltype(units("")){{kBad, 1}, {kBad, 1}}));
  EXPECT_EQ(units("\xF4\x90\x80\x80"), (decltype(units("")){{kBad, 1}, {kBad, 1}, {kBad, 1}, {kBad, 1}}));
}

TEST(Utf8, ToValidAndIncompleteTail) {
  EXPECT_EQ(utf8::to_valid("a\xE2\x82" "b"), "a\uFFFD" "b");
  EXPECT_EQ(utf8::to_valid("\xF0\x9F\x98"), "\uFFFD");
  EXPECT_EQ(utf8::incomplete_tail("ab"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(utf8::incomplete_tail("a\xC3"), 1u);
  EXPECT_EQ(utf8::incomplete_tail("a\xF0\x9F\x98\x80"), 0u);  // complete
  EXPECT_EQ(utf8::incomplete_tail("a\xE2("), 0u);               // already ill-formed
  EXPECT_EQ(utf8::incomplete_tail("a\x80\x80"), 0u);            // stray continuations
  EXPECT_EQ(utf8::incomplete_tail("\xC0"), 0u);                 // can never be completed
}

TEST(UnicodeClass, InlineAsciiTableMatchesGeneratedTable) {
  for (uint32_t cp = 0; cp < 128; ++cp) EXPECT_EQ(unicode::class_flags(cp), unicode::class_flags_slow(cp)) << cp;
}

TEST(UnicodeClass, SpotValues) {
  using namespace unicode;
  EXPECT_STREQ(kUnicodeVersion, "14.0.0");
  EXPECT_TRUE(class_flags(0x4E00) & kLetter);
  EXPECT_TRUE(class_flags(0x0301) & kMark);
  EXPECT_TRUE(class_flags(0x0663) & kNumber);
  EXPECT_TRUE(class_flags(0x00BD) & kNumber);   // ½ (No)
  EXPECT_TRUE(class_flags(0x2160) & kNumber);   // Ⅰ (Nl)
  EXPECT_TRUE(class_flags(0x00AB) & kPunct);    // «
  EXPECT_TRUE(class_flags(0x1F600) & kSymbol);  // 😀
  EXPECT_TRUE(class_flags(0x3000) & kSpace);
  EXPECT_TRUE(class_flags(0x0085) & kSpace);    // White_Space, as in Oniguruma
  EXPECT_FALSE(class_flags(0xFEFF) & kSpace);   // a format character
  EXPECT_EQ(class_flags(0x200D), kWord);        // ZWJ: only \w
  EXPECT_EQ(class_flags(0x0378), 0);            // unassigned
  EXPECT_EQ(class_flags(0x110000), 0);
}

TEST(ByteLevel, AlphabetIsABijection) {
  EXPECT_EQ(byte_level::byte_to_code_point(' '), 0x120u);  // "Ġ"
  EXPECT_EQ(byte_level::byte_to_code_point('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_level::byte_to_code_point('A'), uint32_t('A'));
  for (int b = 0; b < 256; ++b) {
    const auto cp = byte_level::byte_to_code_point(static_cast<uint8_t>(b));
    EXPECT_EQ(byte_level::code_point_to_byte(cp), b);
  }
  EXPECT_EQ(byte_level::unspell("\u0120hi\u010A"), " hi\n");
  EXPECT_FALSE(byte_level::unspell("\uFF5C"));  // outside the alphabet
}

TEST(StreamingDecoder, HoldsBackSplitCharactersUntilComplete) {
  const auto tok = Tokenizer::from_json(test::byte_level_tokenizer({}), "t");  // one token per byte
  StreamingDecoder dec(tok);
  const std::string text = "a\u00e9\U0001F600!";
  std::vector<std::string> pieces;
  for (char c : text) pieces.push_back(dec.push(static_cast<uint8_t>(c)));
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "\u00e9", "", "", "", "\U0001F600", "!"}));
  EXPECT_EQ(dec.finish(), "");
  EXPECT_EQ(dec.push(0xE2), "");
  EXPECT_EQ(dec.pending(), 1u);
  EXPECT_EQ(dec.push('x'), "\uFFFDx");  // the held lead byte can no longer complete
  EXPECT_EQ(dec.push(0xF0), "");
  EXPECT_EQ(dec.finish(), "\uFFFD");   // the stream ended inside a character
}

TEST(StreamingDecoder, ConcatenationEqualsDecodeOnCorpus) {
  const auto tok = Tokenizer::from_file(test::tokenizer_data("tiny/tokenizer.json"));
  for (const char* doc : {"emoji.txt", "odd_unicode.txt", "zh_messages.txt", "random_03.txt"}) {
    const auto ids = tok.encode(test::read_file(test::tokenizer_data(std::string("corpus/") + doc)));
    StreamingDecoder dec(tok);
    std::string streamed;
    for (TokenId id : ids) {
      const std::string part = dec.push(id);
      EXPECT_TRUE(utf8::is_valid(part)) << doc;
      EXPECT_LE(dec.pending(), 3u);
      streamed += part;
    }
    streamed += dec.finish();
    EXPECT_EQ(streamed, tok.decode(ids)) << doc;
  }
}

}  // namespace
}  // namespace flashdesk
