// The V4.1 chat format: renderings derived by hand from docs/model-spec.md §9.3, effort parsing,
// image spans, and the prefix rules the KV prefix cache depends on (chat_template.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/chat_template.h"
#include "engine/util/error.h"
#include "tests/engine/tokenizer_test_util.h"

namespace flashdesk {
namespace {

using Ids = std::vector<TokenId>;

const Tokenizer& tiny() {
  static const Tokenizer tok = Tokenizer::from_file(test::tokenizer_data("tiny/tokenizer.json"));
  return tok;
}

const std::string kBos = "<｜begin▁of▁sentence｜>", kEos = "<｜end▁of▁sentence｜>",
                  kUser = "<｜User｜>", kAsst = "<｜Assistant｜>", kSys = "<｜System｜>",
                  kImg = "<｜deepseek_image｜>";
const std::string kEffort75 =
    "Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n";

ChatOptions options(ThinkingMode mode, bool generation_prompt = true) {
  ChatOptions o;
  o.mode = mode;
  o.add_generation_prompt = generation_prompt;
  return o;
}
ChatOptions chat_mode() {
  return options(ThinkingMode::kChat);
}
ChatOptions thinking(bool generation_prompt = true) {
  return options(ThinkingMode::kThinking, generation_prompt);
}

bool starts_with(const Ids& whole, const Ids& prefix) {
  return prefix.size() <= whole.size() && std::equal(prefix.begin(), prefix.end(), whole.begin());
}

TEST(ChatTemplate, LooksSpecialTokensUpBySpelling) {
  const ChatTemplate chat(tiny());
  EXPECT_EQ(chat.special().bos, *tiny().token_id(kBos));
  EXPECT_NE(chat.special().bos, 0);  // the tiny tokenizer numbers them unlike V4.1
  EXPECT_EQ(chat.special().image, *tiny().token_id(kImg));
  // DeepSeek-V3's tokenizer has no <｜System｜> (V4.1 puts it at 128799): a clear error.
  const auto v3 = Tokenizer::from_file(test::tokenizer_data("deepseek-v3/tokenizer.json"));
  try {
    ChatTemplate bad(v3);
    ADD_FAILURE() << "V3 tokenizer accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("deepseek-v3/tokenizer.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("<｜System｜>"), std::string::npos);
  }
}

TEST(ChatTemplate, RendersTheV41LayoutByHand) {
  const ChatTemplate chat(tiny());
  const std::vector<ChatMessage> one = {ChatMessage::user("Hi")};
  EXPECT_EQ(chat.render_text(one, thinking()),
            kBos + kSys + kEffort75 + kUser + "Hi" + kAsst + "<think>");
  EXPECT_EQ(chat.render_text(one, chat_mode()), kBos + kUser + "Hi" + kAsst + "</think>");
  const std::vector<ChatMessage> sys = {ChatMessage::system("Be brief."), ChatMessage::user("Hi")};
  EXPECT_EQ(chat.render_text(sys, chat_mode()),
            kBos + kSys + "Be brief." + kUser + "Hi" + kAsst + "</think>");
  EXPECT_EQ(chat.render_text(sys, thinking()),
            kBos + kSys + kEffort75 + "Be brief." + kUser + "Hi" + kAsst + "<think>");
}

TEST(ChatTemplate, DropsEarlierReasoningAndKeepsTheLatest) {
  const ChatTemplate chat(tiny());
  std::vector<ChatMessage> conv = {ChatMessage::system("S"), ChatMessage::user("u1"),
                                   ChatMessage::assistant("a1", "r1")};
  // The answer to the last user message keeps its reasoning (it is what the model generated).
  EXPECT_EQ(chat.render_text(conv, thinking(false)),
            kBos + kSys + kEffort75 + "S" + kUser + "u1" + kAsst + "<think>r1</think>a1" + kEos);
  conv.push_back(ChatMessage::user("u2"));
  EXPECT_EQ(chat.render_text(conv, thinking()), kBos + kSys + kEffort75 + "S" + kUser + "u1" +
                                                    kAsst + "</think>a1" + kEos + kUser + "u2" +
                                                    kAsst + "<think>");
  EXPECT_EQ(chat.render_text(conv, chat_mode()), kBos + kSys + "S" + kUser + "u1" + kAsst +
                                                     "</think>a1" + kEos + kUser + "u2" + kAsst +
                                                     "</think>");
  ChatOptions keep = thinking();
  keep.keep_reasoning = true;
  EXPECT_EQ(chat.render_text(conv, keep), kBos + kSys + kEffort75 + "S" + kUser + "u1" + kAsst +
                                              "<think>r1</think>a1" + kEos + kUser + "u2" + kAsst +
                                              "<think>");
}

TEST(ChatTemplate, MidConversationSystemMessageGetsTheAnswer) {
  const ChatTemplate chat(tiny());
  const std::vector<ChatMessage> conv = {ChatMessage::user("u1"), ChatMessage::assistant("a1"),
                                         ChatMessage::system("now in French")};
  EXPECT_EQ(chat.render_text(conv, chat_mode()), kBos + kUser + "u1" + kAsst + "</think>a1" + kEos +
                                                     kSys + "now in French" + kAsst + "</think>");
}

TEST(ChatTemplate, ImagesExpandToTheirGridAndReportSpans) {
  const ChatTemplate chat(tiny());
  const ChatMessage user = ChatMessage::of_parts(
      Role::kUser, {ContentPart::of_text("look"), ContentPart::of_image({2, 3}),
                    ContentPart::of_text("and"), ContentPart::of_image({1, 1})});
  const std::vector<ChatMessage> conv = {user};
  EXPECT_EQ(chat.render_text(conv, chat_mode()),
            kBos + kUser + "look\n\n" + kImg + "\n\nand\n\n" + kImg + kAsst + "</think>");
  const RenderedPrompt p = chat.render(conv, chat_mode());
  ASSERT_EQ(p.images.size(), 2u);
  const TokenId img = chat.special().image;
  // Encoding the text form and expanding each placeholder gives the same ids.
  Ids expected;
  size_t next_image = 0;
  for (TokenId id : tiny().encode(chat.render_text(conv, chat_mode()))) {
    if (id != img) {
      expected.push_back(id);
      continue;
    }
    EXPECT_EQ(p.images[next_image].begin, expected.size());
    expected.insert(expected.end(), p.images[next_image++].grid.token_count(), img);
  }
  EXPECT_EQ(p.ids, expected);
  EXPECT_EQ(p.images[0].end - p.images[0].begin,
            2u + 2 * (3 + 1));  // start, 2 rows of 3 + newline, end
  EXPECT_EQ(p.images[1].end - p.images[1].begin, 4u);
  EXPECT_EQ(p.images[0].grid.rows, 2);
  for (const ImageSpan& s : p.images)
    EXPECT_TRUE(std::all_of(p.ids.begin() + s.begin, p.ids.begin() + s.end,
                            [&](TokenId t) { return t == img; }));
  EXPECT_EQ(std::count(p.ids.begin(), p.ids.end(), img), 10 + 4);
}

TEST(ChatTemplate, RejectsWhatTheFormatCannotExpress) {
  const ChatTemplate chat(tiny());
  const std::vector<ChatMessage> spelled = {ChatMessage::user("see " + kImg)};
  EXPECT_THROW(chat.render(spelled, chat_mode()), InvalidRequest);
  const auto sys_image = ChatMessage::of_parts(Role::kSystem, {ContentPart::of_image({1, 1})});
  EXPECT_THROW(chat.render(std::vector<ChatMessage>{sys_image}, chat_mode()), InvalidRequest);
  const auto empty_grid = ChatMessage::of_parts(Role::kUser, {ContentPart::of_image({0, 3})});
  EXPECT_THROW(chat.render(std::vector<ChatMessage>{empty_grid}, chat_mode()), InvalidRequest);
}

TEST(ReasoningEffort, PresetsNumbersAndErrors) {
  EXPECT_EQ(ReasoningEffort().value(), 75);
  EXPECT_EQ(ReasoningEffort::parse("low").value(), 50);
  EXPECT_EQ(ReasoningEffort::parse("high").value(), 75);
  EXPECT_EQ(ReasoningEffort::parse("max").value(), 100);
  EXPECT_EQ(ReasoningEffort::parse("1").value(), 1);
  EXPECT_EQ(ReasoningEffort::parse("100").value(), 100);
  for (const char* bad : {"0", "101", "-5", "abc", "", " 5", "5x", "xhigh", "HIGH"})
    EXPECT_THROW(ReasoningEffort::parse(bad), InvalidRequest) << bad;
  EXPECT_THROW(ReasoningEffort::of(0), InvalidRequest);
  EXPECT_EQ(
      reasoning_effort_line(ReasoningEffort::of(42)),
      "Reasoning Effort: 42 (range 1-100, the higher the value, the more thorough the reasoning)");
  const ChatTemplate chat(tiny());
  ChatOptions o = thinking();
  o.effort = ReasoningEffort::parse("max");
  EXPECT_NE(chat.render_text(std::vector<ChatMessage>{ChatMessage::user("x")}, o)
                .find("Reasoning Effort: 100 ("),
            std::string::npos);
}

// --- Prefix rules (chat_template.h), on conversations that grow turn by turn. ---

std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> words = {"the", " cat",  "  sat",   "\n\n",  "你好",
                                                 "😀",   "42",    "x ",      " ",     "!",
                                                 "\t",  "don't", "<think>", "end.\n"};
  std::string s;
  for (int n = 1 + rng() % 8; n > 0; --n) s += words[rng() % words.size()];
  return s;
}

// What a model might generate: one token per byte, unlike the canonical encoding of the text.
Ids byte_tokens(const std::string& text) {
  Ids ids;
  for (char c : text) ids.push_back(static_cast<uint8_t>(c));  // tiny's byte ids are the bytes
  return ids;
}

Ids concat(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void check_prefix_rules(ThinkingMode mode, bool keep_reasoning, unsigned seed) {
  const ChatTemplate chat(tiny());
  const SpecialTokenIds& sp = chat.special();
  ChatOptions gen = options(mode);
  gen.keep_reasoning = keep_reasoning;
  ChatOptions history = gen;
  history.add_generation_prompt = false;
  std::mt19937 rng(seed);
  std::vector<ChatMessage> conv = {ChatMessage::system(random_text(rng))};
  for (int turn = 0; turn < 6; ++turn) {
    conv.push_back(ChatMessage::user(random_text(rng)));
    const Ids history_ids = chat.render(conv, history).ids;
    const Ids prompt = chat.render(conv, gen).ids;
    ASSERT_TRUE(starts_with(prompt, history_ids)) << "rule 1, turn " << turn;  // rule 1
    // The model answers: reasoning (thinking mode) and content, ids not in canonical form.
    const std::string reasoning = random_text(rng), content = random_text(rng);
    const bool thinks = mode == ThinkingMode::kThinking;
    const Ids generated = thinks ? concat(concat(byte_tokens(reasoning), {sp.think_end}),
                                          concat(byte_tokens(content), {sp.eos}))
                                 : concat(byte_tokens(content), {sp.eos});
    ChatMessage answer = ChatMessage::assistant(content, thinks ? reasoning : "");
    answer.content_ids = byte_tokens(content);
    if (thinks) answer.reasoning_ids = byte_tokens(reasoning);
    conv.push_back(answer);
    // Rule 2: the conversation with the answer renders as exactly prompt ++ generated.
    ASSERT_EQ(chat.render(conv, history).ids, concat(prompt, generated)) << "rule 2, turn " << turn;
    // The next prompt, after one more user turn.
    std::vector<ChatMessage> next = conv;
    next.push_back(ChatMessage::user(random_text(rng)));
    const Ids next_prompt = chat.render(next, gen).ids;
    ASSERT_TRUE(starts_with(next_prompt, history_ids)) << "rule 1 across the answer, turn " << turn;
    if (!thinks || keep_reasoning) {
      ASSERT_TRUE(starts_with(next_prompt, concat(prompt, generated))) << "rule 3, turn " << turn;
    } else {
      // Rule 4: all of the prompt but its <think> is kept; the answer continues with </think>.
      ASSERT_EQ(prompt.back(), sp.think_begin);
      ASSERT_TRUE(starts_with(next_prompt, Ids(prompt.begin(), prompt.end() - 1)))
          << "rule 4, turn " << turn;
      ASSERT_EQ(next_prompt[prompt.size() - 1], sp.think_end);
      ASSERT_FALSE(starts_with(next_prompt, prompt));
    }
  }
}

TEST(ChatPrefixRules, ChatMode) {
  for (unsigned seed = 1; seed <= 20; ++seed) check_prefix_rules(ThinkingMode::kChat, false, seed);
}
TEST(ChatPrefixRules, ThinkingModeDroppingReasoning) {
  for (unsigned seed = 1; seed <= 20; ++seed)
    check_prefix_rules(ThinkingMode::kThinking, false, seed);
}
TEST(ChatPrefixRules, ThinkingModeKeepingReasoning) {
  for (unsigned seed = 1; seed <= 20; ++seed)
    check_prefix_rules(ThinkingMode::kThinking, true, seed);
}

// Without ids, an answer re-encodes from its text: prompt ++ generated still matches when the
// model generated the canonical encoding of its content.
TEST(ChatPrefixRules, CanonicalGenerationMatchesWithoutIds) {
  const ChatTemplate chat(tiny());
  std::vector<ChatMessage> conv = {ChatMessage::user("What is 2+2?")};
  const Ids prompt = chat.render(conv, chat_mode()).ids;
  const std::string content = "It is 4.\n\nAnything else?";
  conv.push_back(ChatMessage::assistant(content));
  ChatOptions history = chat_mode();
  history.add_generation_prompt = false;
  EXPECT_EQ(chat.render(conv, history).ids,
            concat(concat(prompt, tiny().encode(content)), {chat.special().eos}));
}

}  // namespace
}  // namespace flashdesk
